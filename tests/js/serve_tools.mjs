// Tool calls through the official openai npm client: `ptn serve` runs the stories260K HF
// directory as it is (context raised to 2048) with Qwen 3's chat template, so the tools reach a
// real template and calls come back in its <tool_call> markup. A named or required tool_choice
// must give a call whose arguments parse against the tool's schema, streamed or not.
//   node serve_tools.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_tools.mjs');
// Qwen 3's tool preamble is long in a 512-token vocabulary: the copy's context is 2048 tokens.
const server = await startServer(ptn, root, { template: 'Qwen-Qwen3' });
const client = new OpenAI({ apiKey: 'none', baseURL: server.baseURL, maxRetries: 0, timeout: 60000 });

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
                                                unit: { type: 'string', enum: ['c', 'f'] } },
                  required: ['city', 'unit'] } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];
const base = {
  model: 'stories', tools, max_tokens: 120, temperature: 0.7, seed: 5,
  messages: [{ role: 'user', content: 'Weather in Paris?' }],
  logit_bias: { 1: -100 },  // stories260K would otherwise end at its BOS; the grammar ends the call
};

function checkWeather(call) {
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.match(call.id, /^call_/);
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length <= 12);
  assert.ok(['c', 'f'].includes(args.unit), JSON.stringify(args));
  assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
}

await check('named tool_choice gives that call', async () => {
  const r = await client.chat.completions.create({
    ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(r));
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  checkWeather(c.message.tool_calls[0]);
});

await check('required tool_choice gives a call of some tool', async () => {
  const r = await client.chat.completions.create({ ...base, tool_choice: 'required', parallel_tool_calls: false });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(r));
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  if (call.function.name === 'get_weather') checkWeather(call);
  else assert.deepEqual(JSON.parse(call.function.arguments), {});
});

await check('streamed call, assembled by the client, equals the plain one', async () => {
  const req = { ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } } };
  const whole = await client.chat.completions.create(req);
  const stream = client.beta.chat.completions.stream({ ...req, stream: true });
  const final = await stream.finalChatCompletion();
  const c = final.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  checkWeather(c.message.tool_calls[0]);
  assert.deepEqual(c.message.tool_calls[0].function, whole.choices[0].message.tool_calls[0].function);
});

await check('a tool result goes back to the model', async () => {
  const first = await client.chat.completions.create({
    ...base, tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const call = first.choices[0].message.tool_calls[0];
  const r = await client.chat.completions.create({
    ...base, tool_choice: 'auto', max_tokens: 8,
    messages: [...base.messages, first.choices[0].message,
               { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }] });
  // The tools are there again, and now the call and its result as well.
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens + 20, `${r.usage.prompt_tokens} vs ${first.usage.prompt_tokens}`);
});

await check('malformed tools are refused by name', async () => {
  await assert.rejects(client.chat.completions.create({ ...base, tools: [{ type: 'function', function: { name: 'a b' } }] }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0].function.name');
  await assert.rejects(client.chat.completions.create({
    ...base, tool_choice: { type: 'function', function: { name: 'get_news' } } }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice.function.name');
});

const { code, signal } = await server.stop();
await check('SIGTERM exits 0', async () => assert.deepEqual({ code, signal }, { code: 0, signal: null }));
finish();
