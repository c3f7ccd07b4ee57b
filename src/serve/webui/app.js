// The chat page of `ptn serve` (docs/webui.md): conversations kept in localStorage, replies
// streamed from /v1/chat/completions, a live view of /metrics. Model text reaches the page
// only as text nodes (markdown.js); the server's Content-Security-Policy forbids inline script.
import { renderMarkdown } from './markdown.js';

const $ = (id) => document.getElementById(id);
const KEYS = { conversations: 'ptn.conversations', current: 'ptn.current', settings: 'ptn.settings', apiKey: 'ptn.apiKey' };
const DEFAULTS = { system: '', temperature: 0.7, top_p: 0.95, top_k: 40, max_tokens: 512, seed: '', extra: '' };
const NUMBER_FIELDS = ['temperature', 'top_p', 'top_k', 'max_tokens', 'seed'];

function load(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v ?? fallback;
  } catch {
    return fallback;  // missing or not JSON: start afresh
  }
}
function save(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch (e) {
    showNotice(`could not save to the browser's storage (${e.name}): delete some conversations`);
  }
}

// Conversations: [{ id, title, messages: [{ role, content, reasoning?, tool_calls?, timings?, usage?, state? }] }].
// Whatever storage holds is checked before use: a malformed entry is dropped, not trusted.
function validMessage(m) {
  return m && typeof m === 'object' && ['user', 'assistant'].includes(m.role) && typeof m.content === 'string';
}
let conversations = load(KEYS.conversations, []);
if (!Array.isArray(conversations)) conversations = [];
conversations = conversations
  .filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages))
  .map((c) => ({ id: c.id, title: String(c.title ?? 'chat'), messages: c.messages.filter(validMessage) }));
let currentId = load(KEYS.current, null);
let settings = { ...DEFAULTS, ...load(KEYS.settings, {}) };
let apiKey = load(KEYS.apiKey, '');
let modelId = null;
let running = null;  // { controller, conversation, message } while a reply streams

const current = () => conversations.find((c) => c.id === currentId);
const persist = () => {
  save(KEYS.conversations, conversations);
  save(KEYS.current, currentId);
};

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

// --- the API key -----------------------------------------------------------------------
let keyWaiters = [];
function askForKey(message) {
  $('key-error').hidden = !message;
  $('key-error').textContent = message || '';
  if (!$('key-dialog').open) $('key-dialog').showModal();
  return new Promise((resolve) => keyWaiters.push(resolve));
}
$('key-form').addEventListener('submit', () => {
  apiKey = $('key-input').value.trim();
  save(KEYS.apiKey, apiKey);
  $('forget-key').hidden = !apiKey;
  const w = keyWaiters;
  keyWaiters = [];
  w.forEach((r) => r());
});
$('forget-key').addEventListener('click', () => {
  apiKey = '';
  localStorage.removeItem(KEYS.apiKey);
  $('forget-key').hidden = true;
});

// fetch with the key; a 401 asks for the key (again) and retries.
async function api(path, init = {}) {
  for (;;) {
    const r = await fetch(path, { ...init, headers: headers() });
    if (r.status !== 401) return r;
    await askForKey(apiKey ? 'The server refused that key.' : '');
  }
}

// --- settings --------------------------------------------------------------------------
function showSettings() {
  $('s-system').value = settings.system;
  $('s-extra').value = settings.extra;
  for (const f of NUMBER_FIELDS) $(`s-${f}`).value = settings[f];
  $('forget-key').hidden = !apiKey;
}
function readSettings() {
  settings.system = $('s-system').value;
  settings.extra = $('s-extra').value;
  for (const f of NUMBER_FIELDS) settings[f] = $(`s-${f}`).value;
  save(KEYS.settings, settings);
}
for (const id of ['s-system', 's-extra', ...NUMBER_FIELDS.map((f) => `s-${f}`)])
  $(id).addEventListener('input', readSettings);

// The request's sampling fields; throws with the field's name when one is not valid.
function samplingFields() {
  const out = {};
  for (const f of NUMBER_FIELDS) {
    const v = String(settings[f]).trim();
    if (v === '') continue;
    const n = Number(v);
    if (!Number.isFinite(n)) throw new Error(`${f}: '${v}' is not a number`);
    if (['top_k', 'max_tokens', 'seed'].includes(f) && !Number.isInteger(n)) throw new Error(`${f}: must be a whole number`);
    out[f] = n;
  }
  if (settings.extra.trim()) {
    let extra;
    try {
      extra = JSON.parse(settings.extra);
    } catch (e) {
      throw new Error(`more request fields: not JSON (${e.message})`);
    }
    if (!extra || typeof extra !== 'object' || Array.isArray(extra)) throw new Error('more request fields: must be a JSON object');
    for (const k of ['messages', 'stream', 'stream_options'])
      if (k in extra) throw new Error(`more request fields: '${k}' is set by the page`);
    Object.assign(out, extra);
  }
  return out;
}

// --- rendering -------------------------------------------------------------------------
function showNotice(text) {
  $('s-error').hidden = !text;
  $('s-error').textContent = text || '';
}

function renderConversations() {
  const ul = $('conversations');
  ul.replaceChildren();
  for (const c of [...conversations].reverse()) {
    const li = document.createElement('li');
    if (c.id === currentId) li.className = 'current';
    const title = document.createElement('button');
    title.type = 'button';
    title.className = 'title';
    title.textContent = c.title;
    title.addEventListener('click', () => {
      if (running) return;
      currentId = c.id;
      persist();
      render();
    });
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'delete';
    del.textContent = '×';
    del.title = 'delete this conversation';
    del.addEventListener('click', () => {
      if (running && running.conversation === c) return;
      conversations = conversations.filter((x) => x !== c);
      if (currentId === c.id) currentId = null;
      persist();
      render();
    });
    li.append(title, del);
    ul.append(li);
  }
}

function speed(n, ms) {
  return ms > 0 && n > 0 ? `${((n * 1000) / ms).toFixed(1)} tok/s` : '–';
}

function fillMessage(div, m, index, conv) {
  div.replaceChildren();
  div.className = `msg ${m.role}`;
  div.dataset.state = m.state || 'done';
  const role = document.createElement('div');
  role.className = 'role';
  role.append(document.createTextNode(m.role));
  const actions = document.createElement('span');
  actions.className = 'actions';
  const button = (label, cls, fn) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.className = cls;
    b.addEventListener('click', fn);
    actions.append(b);
  };
  const idle = !running;
  if (idle && m.role === 'user') button('Edit', 'edit', () => editMessage(div, conv, index));
  if (idle && m.role === 'assistant' && index === conv.messages.length - 1) button('Regenerate', 'regenerate', () => regenerate(conv));
  role.append(actions);
  div.append(role);
  if (m.reasoning) {
    const d = document.createElement('details');
    d.className = 'reasoning';
    const s = document.createElement('summary');
    s.textContent = m.state === 'streaming' && !m.content ? 'Thinking…' : 'Reasoning';
    const body = document.createElement('div');
    body.textContent = m.reasoning;
    d.append(s, body);
    div.append(d);
  }
  const content = document.createElement('div');
  content.className = 'content';
  content.append(renderMarkdown(m.content));
  div.append(content);
  for (const call of m.tool_calls || []) {
    const t = document.createElement('div');
    t.className = 'tool-call';
    const name = document.createElement('strong');
    name.textContent = `tool call: ${call?.function?.name ?? '?'}`;
    const args = document.createElement('pre');
    args.textContent = String(call?.function?.arguments ?? '');
    t.append(name, args);
    div.append(t);
  }
  if (m.error) {
    const e = document.createElement('div');
    e.className = 'error';
    e.textContent = m.error;
    div.append(e);
  }
  if (m.role === 'assistant' && (m.timings || m.state === 'stopped' || m.finish_reason)) {
    const meta = document.createElement('div');
    meta.className = 'meta';
    const parts = [];
    if (m.timings) {
      const t = m.timings;
      parts.push(`prompt ${t.prompt_n} tok, ${speed(t.prompt_n, t.prompt_ms)}`);
      parts.push(`generated ${t.predicted_n} tok, ${speed(t.predicted_n, t.predicted_ms)}`);
    }
    if (m.state === 'stopped') parts.push('stopped');
    else if (m.finish_reason) parts.push(`finish: ${m.finish_reason}`);
    meta.textContent = parts.join(' · ');
    div.append(meta);
  }
}

function renderMessages() {
  const box = $('messages');
  box.replaceChildren();
  const conv = current();
  if (!conv) return;
  if (settings.system.trim()) {
    const s = document.createElement('div');
    s.className = 'msg system';
    s.textContent = `system: ${settings.system}`;
    box.append(s);
  }
  conv.messages.forEach((m, i) => {
    const div = document.createElement('div');
    fillMessage(div, m, i, conv);
    box.append(div);
  });
  box.scrollTop = box.scrollHeight;
}

function render() {
  renderConversations();
  renderMessages();
  $('send').hidden = !!running;
  $('stop').hidden = !running;
}

// --- generation ------------------------------------------------------------------------
function requestMessages(conv, upTo) {
  const out = [];
  if (settings.system.trim()) out.push({ role: 'system', content: settings.system });
  for (const m of conv.messages.slice(0, upTo)) {
    const r = { role: m.role, content: m.content };
    if (m.tool_calls?.length) r.tool_calls = m.tool_calls;
    out.push(r);
  }
  return out;
}

// Reads an SSE body: calls onEvent(json) for every "data:" event but [DONE].
async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

// Streams a reply to conv's messages into a new assistant message at the end.
async function generate(conv) {
  let fields;
  try {
    fields = samplingFields();
    showNotice('');
  } catch (e) {
    showNotice(e.message);
    return;
  }
  const m = { role: 'assistant', content: '', reasoning: '', tool_calls: [], state: 'streaming' };
  conv.messages.push(m);
  const controller = new AbortController();
  running = { controller, conversation: conv, message: m };
  render();
  const div = $('messages').lastElementChild;
  let scheduled = false;
  const update = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      fillMessage(div, m, conv.messages.length - 1, conv);
      $('messages').scrollTop = $('messages').scrollHeight;
    });
  };
  try {
    const body = {
      ...(modelId ? { model: modelId } : {}),
      ...fields,
      messages: requestMessages(conv, conv.messages.length - 1),
      stream: true,
      stream_options: { include_usage: true },
    };
    const r = await api('/v1/chat/completions', { method: 'POST', body: JSON.stringify(body), signal: controller.signal });
    if (!r.ok) {
      const text = await r.text();
      let msg = text;
      try {
        msg = JSON.parse(text).error?.message ?? text;
      } catch {}
      throw new Error(`HTTP ${r.status}: ${msg}`);
    }
    await readEvents(r.body, (ev) => {
      if (ev.error) throw new Error(ev.error.message || 'server error');
      if (ev.timings) m.timings = ev.timings;
      if (ev.usage) m.usage = ev.usage;
      const choice = ev.choices?.[0];
      if (!choice) return;
      const d = choice.delta || {};
      if (typeof d.content === 'string') m.content += d.content;
      if (typeof d.reasoning_content === 'string') m.reasoning += d.reasoning_content;
      for (const tc of d.tool_calls || []) {
        const i = Number.isInteger(tc.index) ? tc.index : m.tool_calls.length;
        const t = (m.tool_calls[i] ||= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (tc.id) t.id = tc.id;
        if (tc.function?.name) t.function.name += tc.function.name;
        if (tc.function?.arguments) t.function.arguments += tc.function.arguments;
      }
      if (choice.finish_reason) m.finish_reason = choice.finish_reason;
      update();
    });
    m.state = 'done';
  } catch (e) {
    if (controller.signal.aborted) m.state = 'stopped';
    else {
      m.state = 'error';
      m.error = String(e.message || e);
    }
  }
  if (!m.reasoning) delete m.reasoning;
  if (!m.tool_calls.length) delete m.tool_calls;
  running = null;
  persist();
  render();
}

function send(text) {
  if (running || !text.trim()) return;
  let conv = current();
  if (!conv) {
    conv = { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`, title: text.trim().slice(0, 40), messages: [] };
    conversations.push(conv);
    currentId = conv.id;
  }
  conv.messages.push({ role: 'user', content: text });
  persist();
  generate(conv);
}

function regenerate(conv) {
  if (running) return;
  while (conv.messages.length && conv.messages.at(-1).role === 'assistant') conv.messages.pop();
  generate(conv);
}

function editMessage(div, conv, index) {
  const m = conv.messages[index];
  const content = div.querySelector('.content');
  const area = document.createElement('textarea');
  area.className = 'edit-text';
  area.rows = 3;
  area.value = m.content;
  const ok = document.createElement('button');
  ok.type = 'button';
  ok.className = 'save-send';
  ok.textContent = 'Save & send';
  const cancel = document.createElement('button');
  cancel.type = 'button';
  cancel.textContent = 'Cancel';
  cancel.addEventListener('click', render);
  ok.addEventListener('click', () => {
    if (running || !area.value.trim()) return;
    conv.messages.splice(index);  // this message and everything after it are replaced
    conv.messages.push({ role: 'user', content: area.value });
    if (index === 0) conv.title = area.value.trim().slice(0, 40);
    persist();
    generate(conv);
  });
  content.replaceChildren(area, ok, cancel);
  area.focus();
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('input').value;
  if (!text.trim() || running) return;
  $('input').value = '';
  send(text);
});
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => running?.controller.abort());
$('new-chat').addEventListener('click', () => {
  if (running) return;
  currentId = null;
  persist();
  render();
  $('input').focus();
});

// --- the server's state ----------------------------------------------------------------
function metricValue(text, name) {
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+)$`, 'm'));
  return m ? Number(m[1]) : null;
}
async function pollMetrics() {
  try {
    const r = await api('/metrics');
    if (r.ok) {
      const t = await r.text();
      const used = metricValue(t, 'ptn_kv_blocks_used'), total = metricValue(t, 'ptn_kv_blocks_total');
      $('m-running').textContent = metricValue(t, 'ptn_running_sequences') ?? '?';
      $('m-queue').textContent = metricValue(t, 'ptn_queue_length') ?? '?';
      $('m-kv').textContent = used === null || total === null ? '?' : `${used} / ${total} used`;
      $('m-kv-meter').value = total ? used / total : 0;
    }
  } catch {
    $('m-running').textContent = 'offline';
  }
  setTimeout(pollMetrics, running ? 500 : 2000);
}

async function start() {
  showSettings();
  render();
  try {
    const r = await api('/v1/models');
    const j = await r.json();
    modelId = j.data?.[0]?.id ?? null;
    $('model').textContent = modelId ? `${modelId} · context ${j.data[0].context_length ?? '?'}` : '(no model)';
  } catch (e) {
    $('model').textContent = `(models: ${e.message})`;
  }
  pollMetrics();
}
start();
