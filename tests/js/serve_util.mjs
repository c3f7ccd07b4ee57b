// What the JavaScript tests share: the stories260K HF directory copied with a larger context, a
// `ptn serve` started on a free port (its address read from what it prints), and a named check
// that counts failures.
//   const s = await startServer(ptn, root, { template: 'Qwen-Qwen3' });  // s.baseURL, s.port
//   await check('name', async () => { ... });
//   await s.stop();  // SIGTERM; resolves to { code, signal }
//   finish();        // prints the summary and exits 1 if a check failed
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function parseArgs(usage) {
  const [ptn, root] = process.argv.slice(2);
  if (!ptn || !root) {
    console.error(`usage: node ${usage} <ptn binary> <repo root>`);
    process.exit(2);
  }
  return { ptn, root };
}

// A scratch copy of the bundled stories260K HF directory whose context is `context` tokens.
export function storiesModel(root, context = 2048) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptn-js-'));
  const hf = path.join(root, 'models/stories260K/hf');
  const dir = path.join(tmp, 'hf');
  fs.mkdirSync(dir);
  for (const f of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
    fs.copyFileSync(path.join(hf, f), path.join(dir, f));
  const cfg = JSON.parse(fs.readFileSync(path.join(hf, 'config.json'), 'utf8'));
  cfg.max_position_embeddings = context;
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(cfg));
  return { dir, cleanup: () => fs.rmSync(tmp, { recursive: true, force: true }) };
}

// Starts `ptn serve -m <model> --port 0 ...`; `template` names a file of tests/data/chat/templates
// (without .jinja). Resolves once the server prints its address.
export async function startServer(ptn, root, { model, template, modelName = 'stories', args = [] } = {}) {
  const own = model ? null : storiesModel(root);
  const argv = ['serve', '-m', model ?? own.dir, '--port', '0', '-t', '1', '--model-name', modelName, ...args];
  if (template) argv.push('--chat-template', path.join(root, 'tests/data/chat/templates', `${template}.jinja`));
  const server = spawn(ptn, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => server.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no address printed: ${out}`)), 30000);
    server.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/[^:]+:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    server.on('exit', (code) => reject(new Error(`server exited early (${code}): ${out}`)));
  });
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    baseURL: `http://127.0.0.1:${port}/v1`,
    async stop() {
      server.kill('SIGTERM');
      const r = await exited;
      if (own) own.cleanup();
      return r;
    },
  };
}

let failures = 0;
export async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

export function finish() {
  console.log(failures ? `${failures} failed` : 'all passed');
  process.exit(failures ? 1 : 0);
}
