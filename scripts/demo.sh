#!/usr/bin/env bash
# The README's main job: export the bundled stories260K model (a real trained tiny Llama) into
# a .ptn program, check it against its golden samples, and generate a story with it.
set -euo pipefail
cd "$(dirname "$0")/.."
ptn=${1:-build/ptn}
mkdir -p out
echo "== ptn export (HF directory -> out/stories260K.ptn)"
"$ptn" export --model models/stories260K/hf --offgraph_cache --max_seq_length 256 --samples 2 \
  --output out/stories260K.ptn
echo
echo "== ptn verify (optimized runtime and every cache against the exporter's golden samples)"
"$ptn" verify out/stories260K.ptn
echo
echo "== ptn run (greedy)"
"$ptn" run -m out/stories260K.ptn -p "Once upon a time" -n 200 --temp 0
