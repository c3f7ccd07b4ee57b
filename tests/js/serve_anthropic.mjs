// Anthropic's official client (@anthropic-ai/sdk) against `ptn serve`'s /v1/messages: the
// stories260K HF directory with Qwen 3's chat template (tools reach a real template), the API key
// sent as x-api-key. The tiny model writes nonsense, so the checks are on the protocol: message
// objects, the stream helper's assembled message, a forced tool_use whose input follows the
// schema and its tool_result sent back, stop sequences, count_tokens, and errors surfaced as the
// SDK's APIError subclasses with the right status.
//   node serve_anthropic.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_anthropic.mjs');
const key = 'sk-test-anthropic';
const srv = await startServer(ptn, root, { template: 'Qwen-Qwen3', args: ['--api-key', key] });
const baseURL = `http://127.0.0.1:${srv.port}`;
const client = new Anthropic({ apiKey: key, baseURL, maxRetries: 0, timeout: 60000 });

const user = [{ role: 'user', content: 'Tell me a story.' }];
const weather = {
  name: 'get_weather', description: 'Weather of a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
                                                unit: { type: 'string', enum: ['c', 'f'] } },
                  required: ['city', 'unit'] },
};

function checkWeather(block) {
  assert.equal(block.type, 'tool_use');
  assert.equal(block.name, 'get_weather');
  assert.match(block.id, /^toolu_/);
  assert.equal(typeof block.input.city, 'string');
  assert.ok(block.input.city.length <= 12, block.input.city);
  assert.ok(['c', 'f'].includes(block.input.unit), JSON.stringify(block.input));
}

await check('messages.create returns a message', async () => {
  const m = await client.messages.create({ model: 'stories', max_tokens: 12, temperature: 0, system: 'Be brief.',
                                           messages: user });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'stories');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.content[0].text.length > 0);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.stop_sequence, null);
  assert.equal(m.usage.output_tokens, 12);
  assert.ok(m.usage.input_tokens > 5);
});

await check('the stream helper assembles the same message (greedy)', async () => {
  const body = { model: 'stories', max_tokens: 16, temperature: 0, messages: user };
  const whole = await client.messages.create(body);
  const stream = client.messages.stream(body);
  let text = '';
  stream.on('text', (t) => { text += t; });
  const m = await stream.finalMessage();
  assert.equal(text, whole.content[0].text);
  assert.deepEqual(m.content, whole.content);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.deepEqual(m.usage.output_tokens, 16);
  assert.equal(m.usage.input_tokens, whole.usage.input_tokens);
});

await check('raw stream events come in protocol order', async () => {
  const events = [];
  const s = await client.messages.create({ model: 'stories', max_tokens: 6, temperature: 0, messages: user, stream: true });
  for await (const e of s) events.push(e.type);
  assert.equal(events[0], 'message_start');
  assert.equal(events[1], 'content_block_start');
  assert.equal(events.at(-3), 'content_block_stop');
  assert.equal(events.at(-2), 'message_delta');
  assert.equal(events.at(-1), 'message_stop');
  assert.ok(events.slice(2, -3).every((t) => t === 'content_block_delta'), events.join());
});

await check('a stop sequence ends the reply and is named', async () => {
  const full = await client.messages.create({ model: 'stories', max_tokens: 30, temperature: 0, messages: user });
  const text = full.content[0].text;
  const stop = text.slice(8, 12);
  assert.ok(stop.length === 4 && text.indexOf(stop) === 8, JSON.stringify(text));
  const m = await client.messages.create({ model: 'stories', max_tokens: 30, temperature: 0, messages: user,
                                           stop_sequences: [stop] });
  assert.equal(m.stop_reason, 'stop_sequence');
  assert.equal(m.stop_sequence, stop);
  assert.equal(m.content[0].text, text.slice(0, 8));
});

let call, first;
await check('a forced tool gives a tool_use block that follows the schema', async () => {
  first = await client.messages.create({
    model: 'stories', max_tokens: 200, temperature: 0.7, messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [weather, { name: 'get_time', input_schema: { type: 'object', properties: {} } }],
    tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true } });
  assert.equal(first.stop_reason, 'tool_use');
  const uses = first.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1, JSON.stringify(first.content));
  call = uses[0];
  checkWeather(call);
});

await check('the tool_result goes back and the conversation continues', async () => {
  const r = await client.messages.create({
    model: 'stories', max_tokens: 10, temperature: 0, tools: [weather],
    messages: [{ role: 'user', content: 'Weather in Paris?' },
               { role: 'assistant', content: first.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21 C' }] }] });
  assert.equal(r.type, 'message');
  assert.equal(r.content[0].type, 'text');
  // The template now holds the call and its result too.
  assert.ok(r.usage.input_tokens > first.usage.input_tokens + 10, `${r.usage.input_tokens} vs ${first.usage.input_tokens}`);
});

await check('a streamed forced tool call is assembled by the stream helper', async () => {
  const stream = client.messages.stream({
    model: 'stories', max_tokens: 200, temperature: 0.7, messages: [{ role: 'user', content: 'Weather?' }],
    tools: [weather], tool_choice: { type: 'any', disable_parallel_tool_use: true } });
  const m = await stream.finalMessage();
  assert.equal(m.stop_reason, 'tool_use');
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1);
  checkWeather(uses[0]);
});

await check('count_tokens counts what a request would use', async () => {
  const body = { model: 'stories', system: 'Be brief.', messages: user };
  const c = await client.messages.countTokens(body);
  const m = await client.messages.create({ ...body, max_tokens: 1 });
  assert.equal(c.input_tokens, m.usage.input_tokens);
  const withTools = await client.messages.countTokens({ ...body, tools: [weather] });
  assert.ok(withTools.input_tokens > c.input_tokens + 20);
});

await check('errors surface as the SDK\'s APIError classes', async () => {
  await assert.rejects(client.messages.create({ model: 'nope', max_tokens: 5, messages: user }),
                       (e) => e instanceof Anthropic.NotFoundError && e.status === 404 && /nope/.test(e.message));
  await assert.rejects(client.messages.create({ model: 'stories', messages: user }),
                       (e) => e instanceof Anthropic.BadRequestError && e.status === 400 &&
                              e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.message));
  await assert.rejects(client.messages.create({ model: 'stories', max_tokens: 5, messages: [{ role: 'user', content: [
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }] }),
                       (e) => e instanceof Anthropic.BadRequestError && /content\[0\]\.type/.test(e.message));
  const wrong = new Anthropic({ apiKey: 'wrong', baseURL, maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: 'stories', max_tokens: 5, messages: user }),
                       (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});

await check('SIGTERM exits 0', async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));
finish();
