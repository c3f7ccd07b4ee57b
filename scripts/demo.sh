#!/usr/bin/env bash
# The README's main job: export the bundled stories260K model and generate text with it.
set -euo pipefail
ptn=${1:-build/ptn}
cd "$(dirname "$0")/.."
mkdir -p out
"$ptn" export --model models/stories260K/hf --offgraph_cache --max_seq_length 256 --samples 2 \
  --output out/stories260K.ptn
"$ptn" verify out/stories260K.ptn
"$ptn" run -m out/stories260K.ptn -p "Once upon a time" -n 200
