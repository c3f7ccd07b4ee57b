// `ptn serve` driven by the official openai npm client: completions and chat, streaming and
// not, usage, stop strings, seed reproducibility, structured output and error mapping.
//   node serve_openai.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_openai.mjs');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptn-serve-js-'));
const hf = path.join(root, 'models/stories260K/hf');
const expected = JSON.parse(fs.readFileSync(path.join(root, 'models/stories260K/expected.json'), 'utf8'));

// stories260K with a ChatML template added to its tokenizer_config.json.
const chatHf = path.join(tmp, 'hf');
fs.mkdirSync(chatHf);
for (const f of ['config.json', 'model.safetensors', 'tokenizer.json'])
  fs.copyFileSync(path.join(hf, f), path.join(chatHf, f));
const cfg = JSON.parse(fs.readFileSync(path.join(hf, 'tokenizer_config.json'), 'utf8'));
cfg.chat_template =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
fs.writeFileSync(path.join(chatHf, 'tokenizer_config.json'), JSON.stringify(cfg));
const program = path.join(tmp, 'stories-chat.ptn');
const ex = spawnSync(ptn, ['export', '--model', chatHf, '--max_seq_length', '64', '--samples', '1', '--output', program],
                     { encoding: 'utf8' });
assert.equal(ex.status, 0, `export failed: ${ex.stderr}`);

const server = await startServer(ptn, root, { model: program, modelName: 'stories-chat', args: ['--api-key', 'test-key'] });

const { baseURL } = server;
const client = new OpenAI({ apiKey: 'test-key', baseURL, maxRetries: 0, timeout: 30000 });
const model = 'stories-chat';
const continuation = expected.text_prompt_plus_50.slice(expected.prompt.length);

await check('completion, greedy, known continuation', async () => {
  const r = await client.completions.create({ model, prompt: expected.prompt, max_tokens: 50, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text, continuation);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.completion_tokens, 50);
  assert.equal(r.usage.total_tokens, 55);
});

await check('completion, streaming with usage', async () => {
  const stream = await client.completions.create({
    model, prompt: expected.prompt, max_tokens: 50, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, continuation);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 50);
  assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
});

await check('completion, stop string across tokens', async () => {
  const r = await client.completions.create({
    model, prompt: expected.prompt, max_tokens: 50, temperature: 0, stop: ['girl named', 'nothing'],
  });
  assert.equal(r.choices[0].text, continuation.slice(0, continuation.indexOf('girl named')));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

await check('chat, non-streaming', async () => {
  const r = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 16,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me one.' }],
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.usage.prompt_tokens > 10);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 16);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  // The same prompt again: its full blocks come from the prefix cache.
  const again = await client.chat.completions.create({
    model, temperature: 0, max_tokens: 16,
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me one.' }],
  });
  assert.equal(again.choices[0].message.content, r.choices[0].message.content);
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 16);
});

await check('chat, streaming equals non-streaming', async () => {
  const messages = [{ role: 'user', content: 'Once upon a time' }];
  const whole = await client.chat.completions.create({ model, messages, temperature: 0, max_tokens: 24 });
  const stream = await client.chat.completions.create({
    model, messages, temperature: 0, max_tokens: 24, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let role = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

await check('seeded sampling replays', async () => {
  const req = { model, prompt: expected.prompt, max_tokens: 40, temperature: 1.2, top_p: 0.95, seed: 42 };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  const c = await client.completions.create({ ...req, seed: 43 });
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.notEqual(a.choices[0].text, c.choices[0].text);
});

await check('structured output: json_schema (strict), streamed and not', async () => {
  const schema = {
    type: 'object',
    properties: { title: { type: 'string', maxLength: 40 }, stars: { type: 'integer' }, good: { type: 'boolean' } },
    required: ['title', 'stars', 'good'],
    additionalProperties: false,
  };
  const req = { model, messages: [{ role: 'user', content: 'Rate a story.' }], max_tokens: 120, seed: 7,
                response_format: { type: 'json_schema', json_schema: { name: 'rating', strict: true, schema } } };
  const r = await client.chat.completions.create(req);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const v = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(v), ['title', 'stars', 'good']);  // the schema's order
  assert.equal(typeof v.title, 'string');
  assert.ok(Number.isInteger(v.stars));
  assert.equal(typeof v.good, 'boolean');
  let text = '';
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true }))
    text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, r.choices[0].message.content);
  await assert.rejects(
    client.chat.completions.create({ ...req, response_format: { type: 'json_schema',
      json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } } }),
    (e) => e instanceof OpenAI.BadRequestError && /pattern/.test(e.message));
});

await check('errors map to the client error classes', async () => {
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'hi' }),
                       (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(client.completions.create({ model, prompt: 'hi', n: 65 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'n');
  await assert.rejects(client.chat.completions.create({ model, messages: [], max_tokens: 2 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
  const wrong = new OpenAI({ apiKey: 'wrong', baseURL, maxRetries: 0 });
  await assert.rejects(wrong.completions.create({ model, prompt: 'hi' }),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);
});

const { code, signal } = await server.stop();
await check('SIGTERM exits 0', async () => assert.deepEqual({ code, signal }, { code: 0, signal: null }));
fs.rmSync(tmp, { recursive: true, force: true });
finish();
