// The ollama npm client against `ptn serve`'s Ollama API: the stories260K HF directory with
// Qwen 3's chat template. The tiny model writes nonsense, so the checks are on the protocol:
// chat and generate replies with their counts and measured durations, NDJSON streams that add up
// to the non-streamed reply (greedy), format as a JSON schema, list / show / ps / version, and
// errors surfaced with the server's message and status.
//   node serve_ollama.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_ollama.mjs');
const srv = await startServer(ptn, root, { template: 'Qwen-Qwen3' });
const host = `http://127.0.0.1:${srv.port}`;
const ollama = new Ollama({ host });

const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me a story.' }];
const greedy = { temperature: 0, num_predict: 12 };

function checkFinal(r, evalCount) {
  assert.equal(r.done, true);
  assert.equal(r.model, 'stories');
  assert.equal(r.done_reason, 'length');
  assert.equal(r.eval_count, evalCount);
  assert.ok(r.prompt_eval_count > 0, JSON.stringify(r));
  assert.ok(!Number.isNaN(Date.parse(r.created_at)), r.created_at);
  // Nanoseconds, measured: both phases took some time, and they fit in the total.
  assert.ok(Number.isInteger(r.total_duration) && r.total_duration > 0, JSON.stringify(r));
  assert.ok(r.prompt_eval_duration > 0 && r.eval_duration > 0, JSON.stringify(r));
  assert.ok(r.prompt_eval_duration + r.eval_duration <= r.total_duration, JSON.stringify(r));
}

let chatText;
await check('chat returns a message with counts and durations', async () => {
  const r = await ollama.chat({ model: 'stories', messages, options: greedy });
  assert.equal(r.message.role, 'assistant');
  assert.equal(typeof r.message.content, 'string');
  assert.ok(r.message.content.length > 0);
  checkFinal(r, 12);
  chatText = r.message.content;
});

await check('a streamed chat adds up to the same reply', async () => {
  const parts = [];
  for await (const p of await ollama.chat({ model: 'stories', messages, options: greedy, stream: true })) parts.push(p);
  assert.ok(parts.length >= 3);
  assert.ok(parts.slice(0, -1).every((p) => p.done === false && p.message.role === 'assistant'));
  assert.equal(parts.map((p) => p.message.content).join(''), chatText);
  checkFinal(parts.at(-1), 12);
});

await check('the server streams unless told not to (Ollama\'s default)', async () => {
  const res = await fetch(`${host}/api/chat`, { method: 'POST', body: JSON.stringify({ model: 'stories', messages, options: greedy }) });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /application\/x-ndjson/);
  const lines = (await res.text()).trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(lines.length > 2);
  assert.equal(lines.at(-1).done, true);
});

await check('generate: templated and raw, streamed or not', async () => {
  const r = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: greedy });
  assert.equal(typeof r.response, 'string');
  checkFinal(r, 12);
  const raw = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', raw: true, options: greedy });
  checkFinal(raw, 12);
  // raw: the prompt as it is (no template), so fewer prompt tokens
  assert.ok(raw.prompt_eval_count < r.prompt_eval_count, `${raw.prompt_eval_count} vs ${r.prompt_eval_count}`);
  let text = '';
  let last;
  for await (const p of await ollama.generate({ model: 'stories', prompt: 'Once upon a time', raw: true, options: greedy, stream: true })) {
    text += p.response;
    last = p;
  }
  assert.equal(text, raw.response);
  checkFinal(last, 12);
});

await check('format: a JSON schema constrains the reply', async () => {
  const r = await ollama.chat({
    model: 'stories', messages, options: { temperature: 0.8, seed: 3, num_predict: 100 },
    format: { type: 'object', properties: { mood: { type: 'string', enum: ['happy', 'sad'] } }, required: ['mood'] } });
  assert.equal(r.done_reason, 'stop', JSON.stringify(r));
  const obj = JSON.parse(r.message.content);
  assert.ok(['happy', 'sad'].includes(obj.mood), r.message.content);
  assert.deepEqual(Object.keys(obj), ['mood']);
});

await check('a tool call and its result in the history reach the template', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather',
                   parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const plain = await ollama.chat({ model: 'stories', messages, options: { num_predict: 1 } });
  const r = await ollama.chat({ model: 'stories', tools, options: { num_predict: 1 }, messages: [
    ...messages,
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: '21 C', tool_name: 'get_weather' }] });
  assert.ok(r.prompt_eval_count > plain.prompt_eval_count + 20, `${r.prompt_eval_count} vs ${plain.prompt_eval_count}`);
});

await check('list, show, ps and version describe the served model', async () => {
  const l = await ollama.list();
  assert.equal(l.models.length, 1);
  assert.equal(l.models[0].name, 'stories');
  assert.equal(l.models[0].details.family, 'llama');
  const s = await ollama.show({ model: 'stories' });
  assert.ok(s.capabilities.includes('completion'));
  assert.ok(s.capabilities.includes('tools'));
  assert.match(s.template, /<tool_call>/);
  assert.equal(s.model_info['llama.context_length'], 2048);
  const p = await ollama.ps();
  assert.equal(p.models[0].name, 'stories');
  const v = await ollama.version();
  assert.match(v.version, /^\d+\.\d+\.\d+/);
});

await check('embed gives unit vectors equal to /v1/embeddings', async () => {
  const texts = ['Once upon a time', 'The little dog ran'];
  const r = await ollama.embed({ model: 'stories', input: texts });
  assert.equal(r.embeddings.length, 2);
  const want = await (await fetch(`${host}/v1/embeddings`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ input: texts }),
  })).json();
  for (let i = 0; i < texts.length; i++) {
    const v = r.embeddings[i];
    assert.equal(v.length, want.data[i].embedding.length);
    assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5, `norm ${Math.hypot(...v)}`);
    for (let j = 0; j < v.length; j++) assert.ok(Math.abs(v[j] - want.data[i].embedding[j]) < 1e-6, `${i}.${j}`);
  }
  assert.equal(r.prompt_eval_count, want.usage.prompt_tokens);
});

await check('errors surface with the server\'s message and status', async () => {
  await assert.rejects(ollama.chat({ model: 'nope', messages }),
                       (e) => e.name === 'ResponseError' && e.status_code === 404 && /nope/.test(e.error));
  await assert.rejects(ollama.chat({ model: 'stories', messages, options: { mirostat: 2 } }),
                       (e) => e.status_code === 400 && /options\.mirostat/.test(e.error));
  await assert.rejects(ollama.chat({ model: 'stories', messages: [{ role: 'user', content: 'hi', images: ['aGk='] }] }),
                       (e) => e.status_code === 400 && /images/.test(e.error));
  await assert.rejects(ollama.chat({ model: 'stories', messages, options: { num_ctx: 1 << 20 } }),
                       (e) => e.status_code === 400 && /num_ctx/.test(e.error));
  await assert.rejects(ollama.show({ model: 'nope' }), (e) => e.status_code === 404 && /nope/.test(e.error));
  // an error in a stream started by the client (the body is refused before it streams)
  await assert.rejects((async () => { for await (const _ of await ollama.generate({ model: 'stories', prompt: 'x', suffix: 'y', stream: true })); })(),
                       (e) => e.status_code === 400 && /suffix/.test(e.error));
});

await check('SIGTERM exits 0', async () => assert.deepEqual(await srv.stop(), { code: 0, signal: null }));
finish();
