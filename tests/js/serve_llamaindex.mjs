// LlamaIndex (@llamaindex/openai, chat completions) against `ptn serve`: a forced tool call
// parsed into the message's toolCall, run by llm.exec and its result sent back as a tool
// message, the same call streamed, and structured output that parses against its schema. The
// server runs stories260K with Qwen 3's chat template; a forced call or a schema is made by the
// grammar, so the tiny model's replies must parse in the client's own code.
//   node serve_llamaindex.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import { OpenAI } from '@llamaindex/openai';
import { tool } from '@llamaindex/core/tools';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_llamaindex.mjs');
const server = await startServer(ptn, root, { template: 'Qwen-Qwen3' });

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
let ran = [];
const weather = tool(({ city, unit }) => { ran.push({ city, unit }); return `21 ${unit} in ${city}`; },
                     { name: 'get_weather', description: 'Weather of a city', parameters: weatherSchema });
function checkWeather(args) {
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length <= 12, args.city);
  assert.ok(['c', 'f'].includes(args.unit), JSON.stringify(args));
}
// logit_bias: stories260K ends a story at its BOS (id 1); the grammar decides where a call ends.
const forced = { tool_choice: { type: 'function', function: { name: 'get_weather' } }, logit_bias: { 1: -100 } };
const llm = new OpenAI({ model: 'stories', apiKey: 'none', baseURL: server.baseURL, temperature: 0.7, maxTokens: 400 });
const ask = [{ role: 'user', content: 'Weather in Paris?' }];

await check('LlamaIndex: chat with a forced tool gives a parsed call', async () => {
  const r = await llm.chat({ messages: ask, tools: [weather], additionalChatOptions: forced });
  const calls = r.message.options.toolCall;
  assert.equal(calls.length, 1, JSON.stringify(r.message));
  assert.equal(calls[0].name, 'get_weather');
  assert.match(calls[0].id, /^call_/);
  checkWeather(JSON.parse(calls[0].input));
  assert.equal(r.raw.choices[0].finish_reason, 'tool_calls');
});

await check('LlamaIndex: exec runs the tool and the result goes back as a tool message', async () => {
  ran = [];
  const r = await llm.exec({ messages: ask, tools: [weather], additionalChatOptions: forced });
  assert.equal(ran.length, 1, JSON.stringify(r.newMessages));
  checkWeather(ran[0]);
  assert.equal(r.toolCalls.length, 1);
  const result = r.newMessages.find((m) => m.options?.toolResult);
  assert.ok(result, JSON.stringify(r.newMessages));
  assert.equal(result.options.toolResult.result, `21 ${ran[0].unit} in ${ran[0].city}`);
  // The next turn carries the call and its result: the server renders them with the template.
  const next = await llm.chat({ messages: [...ask, ...r.newMessages], additionalChatOptions: { logit_bias: { 1: -100 } } });
  assert.equal(typeof next.message.content, 'string');
  assert.ok(next.raw.usage.prompt_tokens > 20, JSON.stringify(next.raw.usage));
});

await check('LlamaIndex: a streamed forced call, assembled from its chunks', async () => {
  const stream = await llm.chat({ messages: ask, tools: [weather], stream: true, additionalChatOptions: forced });
  // Chunks carry the call as it grows (arguments as text), the one with the finish_reason the
  // call with its arguments parsed.
  const calls = new Map();
  for await (const chunk of stream) for (const c of chunk.options?.toolCall ?? []) calls.set(c.id, c);
  assert.equal(calls.size, 1, JSON.stringify([...calls.values()]));
  const [call] = calls.values();
  assert.equal(call.name, 'get_weather');
  assert.equal(typeof call.input, 'object', JSON.stringify(call));
  checkWeather(call.input);
});

await check('LlamaIndex: structured output through response_format parses against its schema', async () => {
  const person = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' } },
                   required: ['name', 'age'], additionalProperties: false };
  const r = await llm.chat({
    messages: [{ role: 'user', content: 'A person' }],
    responseFormat: { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } },
    additionalChatOptions: { logit_bias: { 1: -100 } },
  });
  const p = JSON.parse(r.message.content);
  assert.deepEqual(Object.keys(p).sort(), ['age', 'name'], r.message.content);
  assert.ok(Number.isInteger(p.age) && typeof p.name === 'string' && p.name.length <= 10, r.message.content);
});

const { code, signal } = await server.stop();
await check('SIGTERM exits 0', async () => assert.deepEqual({ code, signal }, { code: 0, signal: null }));
finish();
