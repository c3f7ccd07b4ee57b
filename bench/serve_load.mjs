// Load client for bench/serve_bench.sh: for each concurrency level, that many streams each
// send one streaming /v1/completions request at the same time; prompts are token ids (a
// shared system prefix plus a per-request part). Prints aggregate generated tokens/s,
// time to first token and inter-token latency (median, p95), and the server's peak KV bytes
// when it exports ptn_kv_bytes_peak. Works against any server with /tokenize and an
// OpenAI-style streaming /v1/completions (ptn serve, llama-server).
//   node serve_load.mjs --url http://127.0.0.1:8080 [--levels 1,4,8,16] [--prompt 200] [--shared 150]
//                       [--gen 128] [--ban-token 1,2] [--label ptn]
// --ban-token: ids given logit_bias -100 so every request runs its full --gen tokens (BOS and
// EOS by default: ptn ends a generation at either).
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []));
const url = args.url ?? 'http://127.0.0.1:8080';
const levels = (args.levels ?? '1,4,8,16').split(',').map(Number);
const nPrompt = Number(args.prompt ?? 200);
const nShared = Number(args.shared ?? 150);
const nGen = Number(args.gen ?? 128);
const bans = (args['ban-token'] ?? '1,2').split(',');
const label = args.label ?? 'server';
const headers = { 'Content-Type': 'application/json' };
if (args['api-key']) headers.Authorization = `Bearer ${args['api-key']}`;

async function tokenize(text) {
  const r = await fetch(`${url}/tokenize`, { method: 'POST', headers, body: JSON.stringify({ content: text, add_special: false }) });
  if (!r.ok) throw new Error(`/tokenize: ${r.status} ${await r.text()}`);
  return (await r.json()).tokens;
}

const story = 'Once upon a time there was a little girl named Lily. She loved to play in the park with her dog Max. ' +
  'One day the sun was shining and the birds were singing, so Lily and Max ran to the big tree by the pond. ';
let systemTokens = [];
while (systemTokens.length < nShared) systemTokens = systemTokens.concat(await tokenize(story));
systemTokens = systemTokens.slice(0, nShared);
const words = ['apple', 'river', 'castle', 'dragon', 'kite', 'cookie', 'garden', 'rabbit', 'boat', 'star'];
async function userTokens(i) {
  let t = [];
  let k = 0;
  while (t.length < nPrompt - nShared)
    t = t.concat(await tokenize(`Tom found a ${words[(i + k) % 10]} and a ${words[(i * 7 + k++) % 10]} near the ${i} hills. `));
  return t.slice(0, nPrompt - nShared);
}

function quantile(xs, q) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

async function one(prompt) {
  const t0 = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers,
    body: JSON.stringify({ prompt, max_tokens: nGen, temperature: 0, stream: true, logit_bias: Object.fromEntries(bans.map((b) => [b, -100])),
                           stream_options: { include_usage: true } }),
  });
  if (!r.ok) throw new Error(`completions: ${r.status} ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = '';
  let first = null, last = null, chunks = 0, usage = null;
  const gaps = [];
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) usage = j.usage;
      if (!j.choices?.length || !j.choices[0].text) continue;
      const now = performance.now();
      if (first === null) first = now;
      else gaps.push(now - last);
      last = now;
      chunks++;
    }
  }
  return { ttft: first - t0, gaps, tokens: usage?.completion_tokens ?? chunks };
}

console.log(`# ${label}: ${url}, prompt ${nPrompt} tokens (${nShared} shared), ${nGen} generated per stream`);
console.log('streams  tok/s(aggregate)  ttft_p50_ms  ttft_p95_ms  itl_p50_ms  itl_p95_ms');
let counter = 0;
for (const c of levels) {
  const prompts = [];
  for (let i = 0; i < c; i++) prompts.push(systemTokens.concat(await userTokens(counter++)));
  const t0 = performance.now();
  const results = await Promise.all(prompts.map(one));
  const secs = (performance.now() - t0) / 1000;
  const toks = results.reduce((a, r) => a + r.tokens, 0);
  const ttft = results.map((r) => r.ttft);
  const itl = results.flatMap((r) => r.gaps);
  const f = (x) => x.toFixed(1).padStart(11);
  console.log(`${String(c).padStart(7)}  ${(toks / secs).toFixed(1).padStart(16)}  ${f(quantile(ttft, 0.5))}  ${f(quantile(ttft, 0.95))}` +
              ` ${f(quantile(itl, 0.5))} ${f(quantile(itl, 0.95))}`);
}
try {
  const m = await (await fetch(`${url}/metrics`, { headers })).text();
  const peak = m.match(/^ptn_kv_bytes_peak (\d+)/m);
  const hits = m.match(/^ptn_prefix_cache_hit_tokens_total (\d+)/m);
  if (peak) console.log(`peak KV bytes: ${peak[1]} (${(Number(peak[1]) / 1048576).toFixed(2)} MiB)`);
  if (hits) console.log(`prefix-cache hit tokens: ${hits[1]}`);
} catch { /* not every server has /metrics */ }
