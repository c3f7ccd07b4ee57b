// The Responses API (/v1/responses) with the clients that speak it by default: the openai npm
// client's `responses.create` (plain and streamed), the Vercel AI SDK's default `openai(id)`
// model, and the OpenAI Agents SDK running an agent with a function tool. The server runs
// stories260K with Qwen 3's chat template; its text is nonsense, so tool calls are forced
// (tool_choice) or output is constrained (text.format), and the checks are on the protocol: a
// call made with arguments that follow the schema, its output fed back, a final output.
//   node serve_responses.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, streamText, tool as aiTool } from 'ai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_responses.mjs');
const srv = await startServer(ptn, root, { template: 'Qwen-Qwen3' });
const client = new OpenAI({ apiKey: 'none', baseURL: srv.baseURL, maxRetries: 0, timeout: 60000 });

const weatherParams = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: weatherParams, strict: true },
  { type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} } },
];
function checkWeatherArgs(args) {
  assert.equal(typeof args.city, 'string');
  assert.ok(args.city.length <= 12);
  assert.ok(['c', 'f'].includes(args.unit), JSON.stringify(args));
  assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
}
const named = { type: 'function', name: 'get_weather' };

await check('openai: responses.create with a forced call', async () => {
  const r = await client.responses.create({ model: 'stories', input: 'Weather in Paris?', tools, tool_choice: named,
                                            max_output_tokens: 400, temperature: 0.7 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'completed', JSON.stringify(r));
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  assert.equal(calls[0].name, 'get_weather');
  assert.match(calls[0].call_id, /^call_/);
  assert.equal(calls[0].status, 'completed');
  checkWeatherArgs(JSON.parse(calls[0].arguments));
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

await check('openai: a function_call_output goes back to the model', async () => {
  const first = await client.responses.create({ model: 'stories', input: 'Weather in Paris?', tools,
                                                tool_choice: named, max_output_tokens: 400 });
  const call = first.output.find((o) => o.type === 'function_call');
  const r = await client.responses.create({
    model: 'stories', tools, max_output_tokens: 8, instructions: 'Answer briefly.',
    input: [{ role: 'user', content: 'Weather in Paris?' }, ...first.output,
            { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' }] });
  assert.ok(['completed', 'incomplete'].includes(r.status));
  // The call and its result are in the prompt now.
  assert.ok(r.usage.input_tokens > first.usage.input_tokens + 20, `${r.usage.input_tokens} vs ${first.usage.input_tokens}`);
  assert.equal(typeof r.output_text, 'string');  // computed by the client from the output
});

await check('openai: text.format json_schema gives JSON that follows the schema', async () => {
  const r = await client.responses.create({
    model: 'stories', input: 'A person', max_output_tokens: 80,
    text: { format: { type: 'json_schema', name: 'person', strict: true,
                      schema: { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' } },
                                required: ['name', 'age'], additionalProperties: false } } } });
  assert.equal(r.status, 'completed', JSON.stringify(r));
  const v = JSON.parse(r.output_text);
  assert.equal(typeof v.name, 'string');
  assert.ok(Number.isInteger(v.age));
});

await check('openai: streamed events assemble to the final response', async () => {
  const req = { model: 'stories', input: 'Weather?', tools, tool_choice: named, max_output_tokens: 400, temperature: 0.7 };
  const stream = client.responses.stream(req);
  const types = [];
  let args = '';
  stream.on('event', (e) => types.push(e.type));
  stream.on('response.function_call_arguments.delta', (e) => { args += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(types[0], 'response.created');
  assert.equal(types.at(-1), 'response.completed');
  for (const t of ['response.in_progress', 'response.output_item.added', 'response.function_call_arguments.done',
                   'response.output_item.done'])
    assert.ok(types.includes(t), `${t} missing from ${types}`);
  const call = final.output.find((o) => o.type === 'function_call');
  assert.equal(call.arguments, args);
  checkWeatherArgs(JSON.parse(args));
});

await check('openai: streamed text deltas equal the done text', async () => {
  const stream = await client.responses.create({ model: 'stories', input: 'Once upon a time', max_output_tokens: 24,
                                                 stream: true, text: { format: { type: 'json_object' } } });
  let text = '', doneText = null, last = null, seq = -1;
  for await (const e of stream) {
    assert.equal(e.sequence_number, seq + 1);
    seq = e.sequence_number;
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.output_text.done') doneText = e.text;
    last = e;
  }
  assert.equal(doneText, text);
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  const msg = last.response.output.find((o) => o.type === 'message');
  assert.equal(msg.content[0].text, text);
  if (last.type === 'response.incomplete') assert.equal(last.response.incomplete_details.reason, 'max_output_tokens');
});

await check('openai: stateless and unknown fields are refused by name', async () => {
  await assert.rejects(client.responses.create({ model: 'stories', input: 'x', previous_response_id: 'resp_1' }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
  await assert.rejects(client.responses.create({ model: 'stories', input: 'x', tools: [{ type: 'web_search_preview' }] }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0].type');
  await assert.rejects(client.responses.create({ model: 'stories', input: 'x', max_output_tokens: 0 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_output_tokens');
  await assert.rejects(client.responses.create({ model: 'stories', input: 'x', colour: 'red' }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'colour');
});

// The Vercel AI SDK's default model speaks the Responses API.
const provider = createOpenAI({ baseURL: srv.baseURL, apiKey: 'none' });
const aiWeather = aiTool({ description: 'Weather of a city', inputSchema: jsonSchema(weatherParams) });

await check('AI SDK: openai(id) generateText with a forced tool', async () => {
  let executed = 0;
  const r = await generateText({
    model: provider('stories'), prompt: 'Weather in Paris?', maxOutputTokens: 400, temperature: 0.7,
    tools: { get_weather: { ...aiWeather, execute: async (args) => { executed++; checkWeatherArgs(args); return { temp: 21 }; } } },
    toolChoice: { type: 'tool', toolName: 'get_weather' } });
  assert.equal(r.finishReason, 'tool-calls');
  assert.equal(r.toolCalls.length, 1);
  assert.equal(r.toolCalls[0].toolName, 'get_weather');
  checkWeatherArgs(r.toolCalls[0].input);
  assert.equal(executed, 1);
  assert.deepEqual(r.toolResults[0].output, { temp: 21 });
  assert.ok(r.usage.inputTokens > 0);
  assert.match(r.response.id, /^resp_/);
});

await check('AI SDK: openai(id) streamText with toolChoice required', async () => {
  const r = streamText({ model: provider('stories'), prompt: 'Weather?', tools: { get_weather: aiWeather },
                         toolChoice: 'required', maxOutputTokens: 400,
                         providerOptions: { openai: { parallelToolCalls: false } } });
  const calls = await r.toolCalls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].toolName, 'get_weather');
  checkWeatherArgs(calls[0].input);
  assert.equal(await r.finishReason, 'tool-calls');
});

await check('AI SDK: openai(id) plain text streams', async () => {
  const r = streamText({ model: provider('stories'), prompt: 'Once upon a time', maxOutputTokens: 16 });
  let text = '';
  for await (const t of r.textStream) text += t;
  assert.equal(text, await r.text);
  assert.ok(['stop', 'length'].includes(await r.finishReason));
});

// The OpenAI Agents SDK in its default mode (the Responses API), tracing off (it would export
// to OpenAI's servers).
setTracingDisabled(true);
const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: 'none', baseURL: srv.baseURL, useResponses: true }),
                            tracingDisabled: true });
function weatherAgent(calls, outputType) {
  const getWeather = agentTool({
    name: 'get_weather', description: 'Weather of a city', parameters: weatherParams, strict: true,
    execute: async (args) => { calls.push(args); return `It is 21 degrees in ${args.city}.`; },
  });
  // The first turn must call the tool; the SDK resets tool_choice after the call, so the second
  // turn answers (the final output).
  return new Agent({ name: 'weather', instructions: 'You answer weather questions.', tools: [getWeather],
                     model: 'stories', ...(outputType ? { outputType } : {}),
                     modelSettings: { toolChoice: 'required', parallelToolCalls: false, maxTokens: 400, temperature: 0.7 } });
}
// A streamed run ends only on response.completed, and the tiny model's free text runs to
// max_output_tokens (response.incomplete): the answer's schema makes it end by itself.
const answerType = { type: 'json_schema', name: 'answer', strict: true,
                     schema: { type: 'object', properties: { answer: { type: 'string', maxLength: 16 } },
                               required: ['answer'], additionalProperties: false } };

await check('Agents SDK: an agent calls its function tool and gives a final output', async () => {
  const calls = [];
  const result = await runner.run(weatherAgent(calls), 'Weather in Paris?', { maxTurns: 4 });
  assert.equal(calls.length, 1);
  checkWeatherArgs(calls[0]);
  const kinds = result.newItems.map((i) => i.type);
  assert.ok(kinds.includes('tool_call_item'), kinds.join());
  assert.ok(kinds.includes('tool_call_output_item'), kinds.join());
  assert.equal(kinds.at(-1), 'message_output_item', kinds.join());
  assert.equal(typeof result.finalOutput, 'string');
  assert.equal(result.rawResponses.length, 2);  // the call, then the answer with the tool output in its input
  assert.ok(result.rawResponses[1].usage.inputTokens > result.rawResponses[0].usage.inputTokens);
});

await check('Agents SDK: a streamed run with an output type', async () => {
  const calls = [];
  const result = await runner.run(weatherAgent(calls, answerType), 'Weather in Paris?', { maxTurns: 4, stream: true });
  let deltas = '';
  const events = [];
  for await (const e of result) {
    if (e.type === 'raw_model_stream_event' && e.data.type === 'output_text_delta') deltas += e.data.delta;
    if (e.type === 'raw_model_stream_event' && e.data.type === 'model') events.push(e.data.event.type);
  }
  await result.completed;
  assert.equal(calls.length, 1);
  checkWeatherArgs(calls[0]);
  assert.ok(result.newItems.some((i) => i.type === 'tool_call_output_item'));
  // Two streamed responses: the call, then the answer, which follows the schema.
  assert.equal(events.filter((t) => t === 'response.created').length, 2, events.join());
  assert.deepEqual(Object.keys(JSON.parse(deltas)), ['answer']);
  assert.equal(typeof result.finalOutput.answer, 'string', JSON.stringify(result.finalOutput));
  assert.ok(result.finalOutput.answer.length <= 16);
});

const { code, signal } = await srv.stop();
await check('SIGTERM exits 0', async () => assert.deepEqual({ code, signal }, { code: 0, signal: null }));
finish();
