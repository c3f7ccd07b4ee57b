#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (fuzz/CMakeLists.txt) and runs each for a bounded time.
#   scripts/fuzz.sh [BUILD_DIR=build-fuzz] [SECONDS=60] [TARGET...]
# Seeds: fuzz/corpus/<target>, tests/data/fuzz-regressions/<target> and inputs assembled here from
# the real fixtures (models/stories260K, tests/data/...). New coverage goes to
# BUILD_DIR/corpus/<target>; a crashing input is written to BUILD_DIR/artifacts/<target>/ and the
# script exits non-zero after running the remaining targets.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECONDS_EACH=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
JOBS=${JOBS:-$(nproc)}

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (make deps installs clang)" >&2
  exit 1
fi
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  # -O1 with line tables: a crash report names file and line; the compile is far cheaper than -O2 -g.
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DPTN_FUZZ=ON -DPTN_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" >/dev/null
fi
cmake --build "$BUILD" --target fuzz_all -j "$JOBS"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in "$BUILD"/fuzz/fuzz_*; do
    [ -x "$f" ] && targets+=("$(basename "$f" | sed 's/^fuzz_//')")
  done
fi

# --- seeds from the fixtures (regenerated every run; small) ---
seeds="$BUILD/seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{gguf,safetensors,hf_config,ptn,tokenizer_json,chat_template,http_request}
cp models/stories260K/stories260K.gguf models/stories260K/quantized/*.gguf "$seeds/gguf/" 2>/dev/null || true
cp models/stories260K/hf/model.safetensors "$seeds/safetensors/" 2>/dev/null || true
{ cat fuzz/corpus/safetensors/micro.safetensors; printf '\n--index--\n'
  printf '{"metadata":{"total_size":1},"weight_map":{"model.embed_tokens.weight":"model-00001-of-00001.safetensors"}}'
} > "$seeds/safetensors/with-index"
cp tests/data/formats/configs/*.json models/stories260K/hf/config.json "$seeds/hf_config/" 2>/dev/null || true
tok_dir=models/stories260K/hf
{ cat "$tok_dir/tokenizer.json"; printf '\n--config--\n'; cat "$tok_dir/tokenizer_config.json"
  printf '\n--text--\nOnce upon a time, there was a little girl named Lily. <s></s>'
} > "$seeds/tokenizer_json/stories260K"
for t in tests/data/chat/templates/*.jinja; do
  for m in tests/data/chat/messages/*.json; do
    { cat "$t"; printf '\n--messages--\n'; cat "$m"; } > "$seeds/chat_template/$(basename "$t" .jinja)-$(basename "$m" .json)"
  done
done
# An exported program (needs the regular build's ptn binary; `make test` builds it first).
if [ -x build/ptn ]; then
  build/ptn export --model models/stories260K/hf --max_seq_length 16 --samples 1 \
    --output "$seeds/ptn/stories260K.ptn" >/dev/null 2>&1 || echo "fuzz: stories260K export failed; using the committed seeds" >&2
fi

# --- run ---
# Each target is one process on one core; JOBS of them run at once (the 2-core CI machine runs two
# at a time, so 13 targets x 60 s take about 7 minutes, not 13). Every target still gets its full
# SECONDS of its own core.
run_one() {
  local t=$1 exe="$BUILD/fuzz/fuzz_$1" corpus="$BUILD/corpus/$1" artifacts="$BUILD/artifacts/$1"
  local result="$BUILD/fuzz-$1.result" log="$BUILD/fuzz-$1.log" max_len rc=0 execs cov d
  rm -f "$result"
  mkdir -p "$corpus" "$artifacts"
  local dirs=("$corpus")
  for d in "fuzz/corpus/$t" "tests/data/fuzz-regressions/$t" "$seeds/$t"; do
    [ -d "$d" ] && [ -n "$(ls -A "$d")" ] && dirs+=("$d")
  done
  # Whole model files (manifest or tensors at the end) must fit for the seeds to load.
  case "$t" in gguf|ptn) max_len=1300000 ;; *) max_len=262144 ;; esac
  "$exe" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=2560 -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  if [ "$rc" -ne 0 ]; then
    echo "$t: FAILED (exit $rc) after $execs runs; see $log and $artifacts/" >"$result"
    grep -m 20 -E 'ERROR|SUMMARY|==[0-9]+==|terminate|runtime error' "$log" >&2 || true
  else
    echo "$t: ok, $execs runs, cov $cov, corpus $(ls "$corpus" | wc -l) files" >"$result"
  fi
}

status=0
ran=()
for t in "${targets[@]}"; do
  if [ ! -x "$BUILD/fuzz/fuzz_$t" ]; then
    echo "fuzz: no target $t" >&2; status=1; continue
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  echo "fuzz: $t for ${SECONDS_EACH}s (log $BUILD/fuzz-$t.log)"
  run_one "$t" &
  ran+=("$t")
done
wait
for t in "${ran[@]}"; do
  if [ -f "$BUILD/fuzz-$t.result" ]; then
    line=$(cat "$BUILD/fuzz-$t.result")
  else
    line="$t: FAILED (no result written; see $BUILD/fuzz-$t.log)"
  fi
  case "$line" in *FAILED*) status=1 ;; esac
  echo "fuzz: $line"
done
exit $status
