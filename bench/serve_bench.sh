#!/usr/bin/env bash
# Serving benchmark (not a test): starts `ptn serve` on a .ptn program and runs
# bench/serve_load.mjs at 1, 4, 8 and 16 concurrent streams (200-token prompts sharing a
# 150-token system prompt, 128 generated tokens each). Optionally runs the same load against
# a llama-server started from a command line you give, side by side.
#
#   bench/serve_bench.sh MODEL.ptn [-t THREADS] [--ptn BINARY] [--levels 1,4,8,16]
#                        [--llama "llama-server -m model.gguf -np 16 -c 8192 --port 8091" --llama-port 8091]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
model="${1:?usage: serve_bench.sh MODEL.ptn [options]}"
shift
ptn="$root/build/ptn"
threads=""
levels="1,4,8,16"
llama=""
llama_port=8091
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--threads) threads="$2"; shift 2 ;;
    --ptn) ptn="$2"; shift 2 ;;
    --levels) levels="$2"; shift 2 ;;
    --llama) llama="$2"; shift 2 ;;
    --llama-port) llama_port="$2"; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
[ -x "$ptn" ] || { echo "no ptn binary at $ptn (use --ptn)" >&2; exit 1; }

log="$(mktemp)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT

args=(serve -m "$model" --port 0 --parallel 16)
[ -n "$threads" ] && args+=(-t "$threads")
"$ptn" "${args[@]}" "${extra[@]}" >"$log" 2>&1 &
pids+=($!)
port=""
for _ in $(seq 100); do
  port="$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log" >&2; echo "ptn serve did not start" >&2; exit 1; }
node "$here/serve_load.mjs" --url "http://127.0.0.1:$port" --levels "$levels" --label "ptn serve"

if [ -n "$llama" ]; then
  $llama >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$llama_port/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  node "$here/serve_load.mjs" --url "http://127.0.0.1:$llama_port" --levels "$levels" --label "llama-server"
fi
