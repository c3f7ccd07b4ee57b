// A small Markdown renderer that builds DOM nodes: every piece of model text becomes a text
// node (textContent), so no HTML the model writes is ever parsed or run. It knows fenced code
// blocks, headings, lists, block quotes, paragraphs, `code`, **bold**, *italic* and
// [links](https://...) (http and https only).
//   container.append(renderMarkdown(text));   // a DocumentFragment

function el(tag, text) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  return e;
}

// Inline spans of one block's text, appended to `parent`.
function inline(parent, text) {
  // Alternatives in order: code span, bold, italic, link.
  const re = /`([^`\n]+)`|\*\*([^*\n]+)\*\*|\*([^*\n]+)\*|\[([^\]\n]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    if (m[1] !== undefined) parent.append(el('code', m[1]));
    else if (m[2] !== undefined) parent.append(el('strong', m[2]));
    else if (m[3] !== undefined) parent.append(el('em', m[3]));
    else if (/^https?:\/\//i.test(m[5])) {
      const a = el('a', m[4]);
      a.href = m[5];
      a.rel = 'noopener noreferrer';
      a.target = '_blank';
      parent.append(a);
    } else {
      parent.append(document.createTextNode(m[0]));  // other schemes (javascript:, data:) stay text
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
}

export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text).split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) {
      const p = el('p');
      inline(p, para.join('\n'));
      out.append(p);
      para = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+.#-]*)/);
    if (fence) {  // a code block, to its closing fence or the end (a reply still streaming)
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      i++;
      const pre = el('pre');
      if (fence[2]) pre.append(el('span', fence[2]));
      if (fence[2]) pre.firstChild.className = 'lang';
      const code = el('code', body.join('\n'));
      pre.append(code);
      out.append(pre);
      continue;
    }
    const h = line.match(/^(#{1,6})\s+(.*)$/);
    if (h) {
      flush();
      const e = el('h' + Math.min(h[1].length + 2, 6));
      inline(e, h[2]);
      out.append(e);
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      flush();
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? 'ol' : 'ul');
      for (; i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i]); i++) {
        const li = el('li');
        inline(li, lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ''));
        list.append(li);
      }
      out.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      flush();
      const q = [];
      for (; i < lines.length && /^>\s?/.test(lines[i]); i++) q.push(lines[i].replace(/^>\s?/, ''));
      const bq = el('blockquote');
      bq.append(renderMarkdown(q.join('\n')));
      out.append(bq);
      continue;
    }
    if (line.trim() === '') flush();
    else para.push(line);
    i++;
  }
  flush();
  return out;
}
