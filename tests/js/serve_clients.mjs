// The frameworks apps build on, against `ptn serve`: LangChain (@langchain/openai) and the Vercel
// AI SDK (@ai-sdk/openai, chat completions), each with forced tool calls, structured output and
// streaming. The server runs the stories260K HF directory as it is (context raised to 2048) with
// Qwen 3's chat template; a forced call or a schema is made by the grammar, so the tiny model's
// replies must parse and validate in the clients' own code (zod for LangChain and the AI SDK).
//   node serve_clients.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, jsonSchema, streamText, tool as aiTool } from 'ai';
import { z } from 'zod';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_clients.mjs');
// Qwen 3's tool preamble is long in a 512-token vocabulary: the copy's context is 2048 tokens.
const server = await startServer(ptn, root, { template: 'Qwen-Qwen3' });
const { baseURL } = server;

const Person = z.object({ name: z.string().max(10), age: z.number().int() });
function checkWeather(args) {
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length <= 12, args.city);
  assert.ok(['c', 'f'].includes(args.unit), JSON.stringify(args));
}

// --- LangChain ---------------------------------------------------------------------------------
const weather = tool(async ({ city, unit }) => `21 ${unit} in ${city}`, {
  name: 'get_weather', description: 'Weather of a city',
  schema: z.object({ city: z.string().max(12), unit: z.enum(['c', 'f']) }),
});
// logit_bias: stories260K ends a story at its BOS (id 1); the grammar decides where a call ends.
const lc = new ChatOpenAI({ model: 'stories', apiKey: 'none', configuration: { baseURL }, temperature: 0.7,
                            maxTokens: 400, modelKwargs: { logit_bias: { 1: -100 } } });

await check('LangChain: bindTools with a forced tool gives a validated call', async () => {
  const m = await lc.bindTools([weather], { tool_choice: 'get_weather' }).invoke('Weather in Paris?');
  assert.equal(m.tool_calls.length, 1, JSON.stringify(m));
  assert.equal(m.tool_calls[0].name, 'get_weather');
  checkWeather(m.tool_calls[0].args);
  assert.match(m.tool_calls[0].id, /^call_/);
});

await check('LangChain: withStructuredOutput, functionCalling and jsonSchema methods', async () => {
  for (const method of ['functionCalling', 'jsonSchema']) {
    const p = await lc.withStructuredOutput(Person, { method }).invoke('A person');
    assert.deepEqual(Object.keys(p).sort(), ['age', 'name'], `${method}: ${JSON.stringify(p)}`);
    Person.parse(p);
  }
});

await check('LangChain: a streamed forced call, assembled from its chunks', async () => {
  let all;
  for await (const chunk of await lc.bindTools([weather], { tool_choice: 'get_weather' }).stream('Weather?'))
    all = all ? all.concat(chunk) : chunk;
  assert.equal(all.tool_calls.length, 1, JSON.stringify(all));
  checkWeather(all.tool_calls[0].args);
});

await check('LangChain: a field the server does not know is a 400 naming it', async () => {
  const bad = new ChatOpenAI({ model: 'stories', apiKey: 'none', configuration: { baseURL }, maxRetries: 0,
                               modelKwargs: { frobnicate: true } });
  await assert.rejects(bad.invoke('Hi'), (e) => /frobnicate/.test(e.message) && (e.status === 400 || /400/.test(e.message)));
});

// --- Vercel AI SDK -----------------------------------------------------------------------------
const model = createOpenAI({ baseURL, apiKey: 'none' }).chat('stories');
const aiWeather = aiTool({
  description: 'Weather of a city',
  inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string', maxLength: 12 },
                                                          unit: { type: 'string', enum: ['c', 'f'] } },
                            required: ['city', 'unit'], additionalProperties: false }),
});
const noBos = { openai: { logitBias: { 1: -100 } } };

await check('AI SDK: generateText with a forced tool', async () => {
  const r = await generateText({ model, prompt: 'Weather in Paris?', tools: { get_weather: aiWeather },
                                 toolChoice: { type: 'tool', toolName: 'get_weather' }, maxOutputTokens: 400,
                                 temperature: 0.7, providerOptions: noBos });
  assert.equal(r.finishReason, 'tool-calls');
  assert.equal(r.toolCalls.length, 1);
  assert.equal(r.toolCalls[0].toolName, 'get_weather');
  checkWeather(r.toolCalls[0].input);
});

await check('AI SDK: generateObject validates against its zod schema', async () => {
  const r = await generateObject({ model, prompt: 'A person', schema: Person, maxOutputTokens: 80, providerOptions: noBos });
  Person.parse(r.object);
});

await check('AI SDK: streamText with toolChoice required', async () => {
  // One call: with parallel calls allowed the tiny model goes on calling up to maxOutputTokens.
  const r = streamText({ model, prompt: 'Weather?', tools: { get_weather: aiWeather }, toolChoice: 'required',
                         maxOutputTokens: 400,
                         providerOptions: { openai: { ...noBos.openai, parallelToolCalls: false } } });
  const calls = await r.toolCalls;
  assert.equal(calls.length, 1);
  checkWeather(calls[0].input);
  assert.equal(await r.finishReason, 'tool-calls');
});

const { code, signal } = await server.stop();
await check('SIGTERM exits 0', async () => assert.deepEqual({ code, signal }, { code: 0, signal: null }));
finish();
