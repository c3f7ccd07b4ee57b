// Reference renders for ptn's chat template tests, made with @huggingface/jinja (the renderer
// transformers.js and the Hugging Face Hub use). Reads tests/data/chat/templates.json (real
// chat templates), messages/*.json (conversations) and engine_cases.json (small templates, one
// construct each) and writes tests/data/chat/expected/: NAME.txt holds the exact render, or
// NAME.error.txt the error message when rendering throws. Usage (from anywhere):
//   node tests/js/render_templates.mjs [--check]
// --check compares with the files already there instead of writing, exiting 1 on a difference.
import { readFileSync, writeFileSync, readdirSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));
const data = join(here, "..", "data", "chat");
const outDir = join(data, "expected");
const check = process.argv.includes("--check");

// Templates that print today's date (gpt-oss: strftime_now("%Y-%m-%d")) render with this one
// fixed day; ptn's test puts it in place of the day ptn printed.
const FIXED_DAY = Date.UTC(2026, 11, 3, 12, 0, 0);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...a) {
    if (a.length) super(...a);
    else super(FIXED_DAY);
  }
  static now() {
    return FIXED_DAY;
  }
};

const results = new Map(); // file name -> content

function render(name, source, context) {
  try {
    const text = new Template(source).render(context);
    results.set(`${name}.txt`, text);
  } catch (e) {
    results.set(`${name}.error.txt`, String(e.message));
  }
}

// transformers passes these variables (tools and documents are None when absent).
const templates = JSON.parse(readFileSync(join(data, "templates.json"), "utf8"));
const sets = readdirSync(join(data, "messages")).filter((f) => f.endsWith(".json")).sort();
for (const [tname, t] of Object.entries(templates)) {
  const source = readFileSync(join(data, t.file), "utf8");
  for (const setFile of sets) {
    const set = JSON.parse(readFileSync(join(data, "messages", setFile), "utf8"));
    for (const gen of [false, true]) {
      const context = {
        messages: set.messages,
        tools: set.tools ?? null,
        documents: null,
        add_generation_prompt: gen,
        bos_token: t.bos_token,
        eos_token: t.eos_token,
        ...(set.extra ?? {}),
      };
      render(`${tname}__${setFile.replace(/\.json$/, "")}__gen${gen ? 1 : 0}`, source, context);
    }
  }
}

const engineCases = JSON.parse(readFileSync(join(data, "engine_cases.json"), "utf8"));
for (const c of engineCases) render(`engine__${c.name}`, c.template, c.context);

if (check) {
  let bad = 0;
  for (const [file, content] of results) {
    const path = join(outDir, file);
    if (!existsSync(path) || readFileSync(path, "utf8") !== content) {
      console.error(`differs: ${file}`);
      ++bad;
    }
  }
  console.log(`${results.size - bad} passed, ${bad} failed`);
  process.exit(bad ? 1 : 0);
}
rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });
for (const [file, content] of results) writeFileSync(join(outDir, file), content);
console.log(`wrote ${results.size} files to ${outDir}`);
