// Writes tests/data/tokenizers/o200k.inp and o200k.out: texts and the ids that the o200k_base
// encoder of the npm package gpt-tokenizer (4.0.0, installed as gpt-tokenizer-v4; its own byte-pair encoder
// and pre-split regex, written after OpenAI's tiktoken) gives them, as text (no special tokens).
// The texts are llama.cpp's tokenizer test texts plus ones aimed at what o200k's split rules
// do: case changes inside words, contractions on words, three-digit numbers, '/' and newlines
// after punctuation, combining marks. Run from tests/js: node make_o200k_vectors.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { encode } from 'gpt-tokenizer-v4/encoding/o200k_base';

const sep = '\n__ggml_vocab_test__\n';
const data = new URL('../data/tokenizers/', import.meta.url);
const base = readFileSync(new URL('ggml-vocab-gpt-2.gguf.inp', data), 'utf8').split(sep).filter((t, i, a) => i < a.length - 1);
const extra = [
  'HTTPServer parseJSONResponse getHTTPSURL iPhone McDonald',
  "I'M HE'S they'll WE'VE You'Re don'T",
  '1234567 12 123 1234 3.14159 1,000,000',
  'path/to/file.txt\nhttps://example.com/a/b?c=d&e=f\n',
  '}}\n\n  )/\r\n*/\n',
  'nai\u0308ve cafe\u0301 \u0915\u093f\u0924\u093e\u092c \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35',
  '\u4f60\u597d\u4e16\u754c \u3053\u3093\u306b\u3061\u306f \uc548\ub155\ud558\uc138\uc694 \u041f\u0440\u0438\u0432\u0435\u0442 \u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1',
  '\ud83d\ude00\ud83d\udc4d\ud83c\udffd  \ud83e\udd16 emoji\ud83d\ude80rocket',
  'def f(x):\n\treturn x**2  # square\n\n\nclass A:\n    pass\n',
  '<|endoftext|> is text here, <|start|> too',
  'ALLCAPS Title Case lowercase MiXeD CaSe ABCdef abcDEF',
  '   leading and trailing   \t\n',
];
const texts = [...base, ...extra];
const opts = { disallowedSpecial: new Set() };
writeFileSync(new URL('o200k.inp', data), texts.map((t) => t + sep).join(''));
writeFileSync(new URL('o200k.out', data), texts.map((t) => encode(t, opts).join(' ') + '\n').join(''));
console.log(`wrote ${texts.length} texts`);
