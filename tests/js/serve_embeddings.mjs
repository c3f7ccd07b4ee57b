// /v1/embeddings with the clients apps embed through, against `ptn serve` on the stories260K HF
// directory (exported in memory at start): LangChain's OpenAIEmbeddings (its openai client asks
// for base64 and decodes it) and the Vercel AI SDK's embed / embedMany (floats). Each must give
// 64-dimensional unit vectors equal to the server's own float reply for the same text, in order.
//   node serve_embeddings.mjs <ptn binary> <repo root>
import assert from 'node:assert/strict';
import path from 'node:path';
import { OpenAIEmbeddings } from '@langchain/openai';
import { createOpenAI } from '@ai-sdk/openai';
import { embed, embedMany } from 'ai';
import { check, finish, parseArgs, startServer } from './serve_util.mjs';

const { ptn, root } = parseArgs('serve_embeddings.mjs');
// An f32 cache: with the default f16 one, texts batched in one request can round a K/V value the
// other way than alone, and on a tiny model one such flip moved a value by 1.3e-4 (seen in the -O1
// sanitizer build); in f32 only the summation order differs.
const server = await startServer(ptn, root, { model: path.join(root, 'models/stories260K/hf'),
                                             args: ['--cache-type', 'f32'] });
const { baseURL } = server;

const texts = ['Once upon a time', 'The little dog ran to the park.', 'Lily and Ben were friends'];

// The server's reply without a client library: floats, one request per text.
async function direct(text) {
  const r = await fetch(`${baseURL}/embeddings`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'stories', input: text, encoding_format: 'float' }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  return { embedding: j.data[0].embedding, tokens: j.usage.prompt_tokens };
}
const want = [];
for (const t of texts) want.push(await direct(t));

// `exact`: one text per request, as `want` was computed, so the same f32 values (base64 decodes
// to them exactly, floats print them exactly). Texts batched in one request share engine steps
// whose matrix products sum in another order: equal to ~1e-7 with the f32 cache above.
function checkVector(got, expected, what, exact = true) {
  assert.equal(got.length, 64, `${what}: dimension`);
  const norm = Math.sqrt(got.reduce((s, x) => s + x * x, 0));
  assert.ok(Math.abs(norm - 1) < 1e-5, `${what}: norm ${norm}`);
  if (exact) {
    assert.deepEqual(Array.from(got), expected, what);
  } else {
    const worst = Math.max(...got.map((x, i) => Math.abs(x - expected[i])));
    assert.ok(worst < 1e-5, `${what}: differs by up to ${worst}`);
  }
}

await check('the direct reply is a unit vector and texts differ', async () => {
  for (const w of want) checkVector(w.embedding, w.embedding, 'direct');
  assert.notDeepEqual(want[0].embedding, want[1].embedding);
});

// --- LangChain ---------------------------------------------------------------------------------
const lc = new OpenAIEmbeddings({ model: 'stories', apiKey: 'none', configuration: { baseURL } });

await check('LangChain: embedDocuments gives the server\'s vectors in order', async () => {
  const got = await lc.embedDocuments(texts);
  assert.equal(got.length, texts.length);
  got.forEach((v, i) => checkVector(v, want[i].embedding, `document ${i}`, false));
});

await check('LangChain: embedQuery gives the server\'s vector', async () => {
  checkVector(await lc.embedQuery(texts[1]), want[1].embedding, 'query');
});

await check('LangChain: dimensions the model cannot shorten to is an error naming the field', async () => {
  const short = new OpenAIEmbeddings({ model: 'stories', apiKey: 'none', configuration: { baseURL }, dimensions: 16 });
  await assert.rejects(short.embedQuery('hi'), (e) => e.status === 400 && /dimensions/.test(e.message));
});

// --- Vercel AI SDK -----------------------------------------------------------------------------
const openai = createOpenAI({ baseURL, apiKey: 'none' });

await check('AI SDK: embed with openai.embedding(id) gives the server\'s vector and usage', async () => {
  const { embedding, usage } = await embed({ model: openai.embedding('stories'), value: texts[0] });
  checkVector(embedding, want[0].embedding, 'embed');
  assert.equal(usage.tokens, want[0].tokens);
});

await check('AI SDK: embedMany with textEmbeddingModel(id) keeps the order', async () => {
  const { embeddings, usage } = await embedMany({ model: openai.textEmbeddingModel('stories'), values: texts });
  assert.equal(embeddings.length, texts.length);
  embeddings.forEach((v, i) => checkVector(v, want[i].embedding, `value ${i}`, false));
  assert.equal(usage.tokens, want.reduce((s, w) => s + w.tokens, 0));
});

await check('AI SDK: an unknown model is a 404 error', async () => {
  await assert.rejects(embed({ model: openai.embedding('nope'), value: 'hi', maxRetries: 0 }),
                       (e) => e.statusCode === 404);
});

const { code, signal } = await server.stop();
await check('SIGTERM exits 0', async () => assert.deepEqual({ code, signal }, { code: 0, signal: null }));
finish();
