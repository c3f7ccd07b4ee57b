// The chat page of `ptn serve` in a real browser (headless Chromium through playwright-core):
// a reply streams in (several updates) and equals the API's own greedy reply, the speed line
// shows the server's timings, a long reply is stopped and the server ends the sequence, a
// reload finds the conversation, regenerate and edit-and-resend send new requests, a stored
// reply full of HTML and markdown is shown as text and never executed, the /metrics view
// shows the pool, the API key is asked for and sent, and --no-webui leaves / a 404.
import { launchBrowser } from './browser_util.mjs';
import { check, finish, parseArgs, startServer, storiesModel } from './serve_util.mjs';

const { ptn, root } = parseArgs('webui_browser.mjs');
const assert = (cond, msg) => { if (!cond) throw new Error(msg); };
const EOS = 2;  // stories260K's </s>: banned where a reply must run to max_tokens

const model = storiesModel(root, 8192);
const server = await startServer(ptn, root, { model: model.dir, template: 'Qwen-Qwen2.5-7B-Instruct' });
const browser = await launchBrowser();

async function metric(url, name, headers = {}) {
  const t = await (await fetch(`${url}/metrics`, { headers })).text();
  const m = t.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  if (!m) throw new Error(`${name} missing from /metrics`);
  return Number(m[1]);
}

// The reply the API gives to `messages` without the page (greedy, so it is the page's too).
async function apiReply(messages, fields) {
  const r = await fetch(`${server.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'stories', messages, ...fields }),
  });
  const j = await r.json();
  assert(r.ok, `reference request failed: ${JSON.stringify(j)}`);
  return j.choices[0].message.content;
}

async function setSettings(page, s) {
  if (!(await page.locator('#settings').evaluate((d) => d.open))) await page.click('#settings summary');
  for (const [k, v] of Object.entries(s)) await page.fill(`#s-${k}`, String(v));
}

// Records every distinct text of the last assistant message as it changes.
async function watchLastReply(page) {
  await page.evaluate(() => {
    window.__texts = [];
    const box = document.getElementById('messages');
    new MutationObserver(() => {
      const c = box.querySelector('.msg.assistant:last-of-type .content');
      const t = c ? c.textContent : '';
      if (t && window.__texts.at(-1) !== t) window.__texts.push(t);
    }).observe(box, { childList: true, subtree: true, characterData: true });
  });
}
const lastReply = (page) => page.locator('#messages .msg.assistant').last();
const waitState = (page, state, timeout = 30000) =>
  page.waitForSelector(`#messages .msg.assistant:last-of-type[data-state="${state}"]`, { timeout });

const context = await browser.newContext();
const page = await context.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
const chatRequests = [];
page.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) chatRequests.push(r); });
// Long enough that the stream reaches the page in several reads even when the machine is busy:
// stories260K makes tokens in microseconds, and at 200 the whole reply came in one read in 1 of 5
// runs (0 of 6 at 400).
const REPLY_TOKENS = 400;
const fields = { temperature: 0, max_tokens: REPLY_TOKENS, extra: JSON.stringify({ logit_bias: { [EOS]: -100 } }) };
const prompt = 'Once upon a time';

await check('the page loads with its security policy and shows the model', async () => {
  const r = await page.goto(server.url + '/');
  assert(r.status() === 200, `status ${r.status()}`);
  const csp = r.headers()['content-security-policy'] || '';
  assert(csp.includes("script-src 'self'") && !csp.includes('unsafe-inline'), `policy: ${csp}`);
  assert((await page.title()) === 'ptn chat', 'title');
  await page.waitForFunction(() => document.getElementById('model').textContent.startsWith('stories'));
});

let firstReply = '';
await check('a message streams a reply that is the API greedy reply, with its speed', async () => {
  await setSettings(page, fields);
  await watchLastReply(page);
  await page.fill('#input', prompt);
  await page.click('#send');
  await waitState(page, 'done');
  firstReply = await lastReply(page).locator('.content').innerText();
  const texts = await page.evaluate(() => window.__texts);
  assert(texts.length >= 2, `the reply arrived in ${texts.length} update(s)`);
  assert(texts[0].length < texts.at(-1).length, 'the first update was already the whole reply');
  const expected = await apiReply([{ role: 'user', content: prompt }],
    { temperature: 0, max_tokens: REPLY_TOKENS, top_p: 0.95, top_k: 40, logit_bias: { [EOS]: -100 } });
  assert(firstReply.trim() === expected.trim(), `page: ${JSON.stringify(firstReply)}\napi:  ${JSON.stringify(expected)}`);
  const meta = await lastReply(page).locator('.meta').innerText();
  assert(new RegExp(`prompt \\d+ tok, [\\d.]+ tok/s · generated ${REPLY_TOKENS} tok, [\\d.]+ tok/s`).test(meta), `speed line: ${meta}`);
});

await check('the server view shows the KV pool from /metrics', async () => {
  const total = await metric(server.url, 'ptn_kv_blocks_total');
  await page.waitForFunction((t) => document.getElementById('m-kv').textContent.endsWith(`/ ${t} used`), total,
    { timeout: 10000 });
  assert(/^\d+$/.test(await page.locator('#m-running').innerText()), 'running sequences');
});

await check('stop ends a long reply in the page and on the server', async () => {
  const before = await metric(server.url, 'ptn_generated_tokens_total');
  await setSettings(page, { max_tokens: 8000 });
  await page.fill('#input', 'Tell me a long story');
  await page.click('#send');
  await page.waitForFunction(() => {
    const c = document.querySelector('#messages .msg.assistant:last-of-type .content');
    return c && c.textContent.length > 40;
  });
  await page.waitForFunction(() => document.getElementById('m-running').textContent === '1', null, { timeout: 10000 })
    .catch(() => {});  // (a fast reply may end before the view's next poll; the counts below decide)
  await page.click('#stop');
  await waitState(page, 'stopped');
  assert((await lastReply(page).locator('.meta').innerText()).includes('stopped'), 'no "stopped" mark');
  // The server sees the stop when its next write to the closed stream fails: up to 10 s on a
  // loaded machine (2 s was seen to be too short beside a sanitizer build).
  let running = 1;
  for (let i = 0; i < 500 && running !== 0; i++) {
    running = await metric(server.url, 'ptn_running_sequences');
    if (running) await new Promise((r) => setTimeout(r, 20));
  }
  assert(running === 0, 'the server still runs the sequence');
  const generated = (await metric(server.url, 'ptn_generated_tokens_total')) - before;
  assert(generated < 8000, `the server generated all ${generated} tokens: it did not see the stop`);
  console.log(`     (the server generated ${generated} of the 8000 tokens asked for)`);
  await setSettings(page, { max_tokens: 60 });
});

await check('a reload finds the conversation', async () => {
  await page.reload();
  await page.waitForSelector('#messages .msg.user');
  const users = await page.locator('#messages .msg.user .content').allInnerTexts();
  assert(users[0].trim() === prompt && users[1].trim() === 'Tell me a long story', `users: ${JSON.stringify(users)}`);
  const first = await page.locator('#messages .msg.assistant .content').first().innerText();
  assert(first === firstReply, 'the first reply changed');
  assert((await page.locator('#conversations li').count()) === 1, 'one conversation listed');
  assert((await page.locator('#conversations li').first().innerText()).includes(prompt), 'its title');
  assert((await lastReply(page).getAttribute('data-state')) === 'stopped', 'the stopped reply is kept as stopped');
});

await check('regenerate replaces the last reply with a new request', async () => {
  const n = chatRequests.length;
  await setSettings(page, { max_tokens: 30 });
  await lastReply(page).locator('button.regenerate').click();
  await waitState(page, 'done');
  assert(chatRequests.length === n + 1, 'no new request');
  const sent = JSON.parse(chatRequests.at(-1).postData());
  assert(sent.messages.length === 3 && sent.messages.at(-1).role === 'user', `sent: ${JSON.stringify(sent.messages)}`);
  assert(sent.max_tokens === 30 && sent.temperature === 0, 'the settings were not sent');
  const text = await lastReply(page).locator('.content').innerText();
  const expected = await apiReply(sent.messages, { temperature: 0, max_tokens: 30, logit_bias: { [EOS]: -100 } });
  assert(text.trim() === expected.trim(), `regenerated: ${JSON.stringify(text)} api: ${JSON.stringify(expected)}`);
  assert((await page.locator('#messages .msg').count()) === 4, 'the conversation should keep 4 messages');
});

await check('edit-and-resend replaces a message and everything after it', async () => {
  await page.locator('#messages .msg.user').first().locator('button.edit').click();
  await page.fill('#messages .edit-text', 'A cat sat');
  await page.click('#messages button.save-send');
  await waitState(page, 'done');
  const roles = await page.locator('#messages .msg').evaluateAll((d) => d.map((e) => e.className));
  assert(roles.join() === 'msg user,msg assistant', `messages: ${roles}`);
  assert((await page.locator('#messages .msg.user .content').innerText()).trim() === 'A cat sat', 'edited text');
  const expected = await apiReply([{ role: 'user', content: 'A cat sat' }],
    { temperature: 0, max_tokens: 30, logit_bias: { [EOS]: -100 } });
  const text = await lastReply(page).locator('.content').innerText();
  assert(text.trim() === expected.trim(), `edited reply: ${JSON.stringify(text)} api: ${JSON.stringify(expected)}`);
});

await check('a stored reply with HTML is shown as text, never run; markdown, reasoning and tool calls render', async () => {
  const evil = '<script>window.__pwned=1</script> and <img src=x onerror="window.__pwned=2">\n\n' +
    '**bold** and `code` and [bad](javascript:window.__pwned=3)\n\n```html\n<script>window.__pwned=4</script>\n```';
  await page.evaluate((content) => {
    const conv = JSON.parse(localStorage.getItem('ptn.conversations'));
    conv.push({ id: 'stored', title: 'stored', messages: [
      { role: 'user', content: 'show me <b>html</b>' },
      { role: 'assistant', content, reasoning: 'thinking <i>hard</i>',
        tool_calls: [{ id: 't1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"<Paris>"}' } }],
        timings: { prompt_n: 5, prompt_ms: 10, predicted_n: 7, predicted_ms: 20 } }] });
    localStorage.setItem('ptn.conversations', JSON.stringify(conv));
    localStorage.setItem('ptn.current', JSON.stringify('stored'));
  }, evil);
  await page.reload();
  const reply = lastReply(page);
  await reply.waitFor();
  const text = await reply.locator('.content').innerText();
  assert(text.includes('<script>window.__pwned=1</script>'), `script tag not shown as text: ${text}`);
  assert(text.includes('<img src=x onerror="window.__pwned=2">'), 'img tag not shown as text');
  assert((await reply.locator('.content script, .content img').count()) === 0, 'HTML elements were created');
  assert((await reply.locator('.content strong').innerText()) === 'bold', 'bold');
  assert((await reply.locator('.content pre code').innerText()).includes('<script>window.__pwned=4</script>'), 'code block');
  assert((await reply.locator('.content a').count()) === 0, 'a javascript: link became a link');
  assert((await reply.locator('details.reasoning').evaluate((d) => d.open)) === false, 'reasoning not folded');
  assert((await reply.locator('details.reasoning div').textContent()) === 'thinking <i>hard</i>', 'reasoning text');
  assert((await reply.locator('.tool-call').innerText()).includes('get_weather'), 'tool call name');
  assert((await reply.locator('.tool-call pre').innerText()) === '{"city":"<Paris>"}', 'tool call arguments');
  assert((await reply.locator('.meta').innerText()).includes('500.0 tok/s'), 'speed from timings');
  assert((await page.locator('#messages .msg.user .content').innerText()) === 'show me <b>html</b>', 'user html');
  await page.waitForTimeout(200);
  assert((await page.evaluate(() => window.__pwned)) === undefined, 'model text was executed');
  assert(pageErrors.length === 0, `page errors: ${pageErrors.join('; ')}`);
});

await check('even an inline script in the page would be refused by the policy', async () => {
  const violations = await page.evaluate(() => new Promise((resolve) => {
    const seen = [];
    document.addEventListener('securitypolicyviolation', (e) => seen.push(e.violatedDirective));
    const s = document.createElement('script');
    s.textContent = 'window.__pwned = 5';
    document.body.append(s);
    setTimeout(() => resolve(seen), 100);
  }));
  assert(violations.some((v) => v.startsWith('script-src')), `no violation: ${violations}`);
  assert((await page.evaluate(() => window.__pwned)) === undefined, 'the inline script ran');
});
await context.close();
await server.stop();
model.cleanup();

await check('with --api-key the page asks for the key, keeps it and sends it', async () => {
  const keyed = await startServer(ptn, root, { template: 'Qwen-Qwen2.5-7B-Instruct', args: ['--api-key', 'k-123'] });
  try {
    const ctx = await browser.newContext();
    const p = await ctx.newPage();
    const auth = [];
    p.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) auth.push(r.headers().authorization); });
    await p.goto(keyed.url + '/');
    await p.waitForSelector('#key-dialog[open]');
    await p.fill('#key-input', 'wrong');
    await p.click('#key-form button');
    await p.waitForFunction(() => document.getElementById('key-error').textContent.includes('refused'));
    await p.fill('#key-input', 'k-123');
    await p.click('#key-form button');
    await p.waitForFunction(() => document.getElementById('model').textContent.startsWith('stories'));
    assert(JSON.parse(await p.evaluate(() => localStorage.getItem('ptn.apiKey'))) === 'k-123', 'key not kept');
    await setSettings(p, { temperature: 0, max_tokens: 8 });
    await p.fill('#input', 'Hi');
    await p.click('#send');
    await waitState(p, 'done');
    assert(auth.at(-1) === 'Bearer k-123', `sent: ${auth.at(-1)}`);
    await p.reload();  // the kept key is used without asking again
    await p.waitForFunction(() => document.getElementById('model').textContent.startsWith('stories'));
    assert(!(await p.locator('#key-dialog').evaluate((d) => d.open)), 'asked again after a reload');
    await ctx.close();
  } finally {
    await keyed.stop();
  }
});

await check('with --no-webui / answers 404', async () => {
  const off = await startServer(ptn, root, { args: ['--no-webui'] });
  try {
    const r = await fetch(off.url + '/');
    assert(r.status === 404, `status ${r.status}`);
    const app = await fetch(off.url + '/webui/app.js');
    assert(app.status === 404, `app.js status ${app.status}`);
  } finally {
    await off.stop();
  }
});

await browser.close();
finish();
