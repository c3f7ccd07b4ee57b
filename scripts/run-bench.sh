#!/usr/bin/env bash
# Runs every benchmark program of a bench build directory (`make bench` passes build-bench).
# Extra arguments go to each program (e.g. --benchmark_filter=Decode).
set -euo pipefail
dir="${1:?usage: scripts/run-bench.sh <bench build dir> [benchmark args...]}"
shift
found=0
for exe in "$dir"/bench/bench_*; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue
  found=1
  echo "== $(basename "$exe")"
  "$exe" --benchmark_counters_tabular=true "$@"
done
if [ "$found" = 0 ]; then
  echo "run-bench.sh: no bench_* programs in $dir/bench (configure with -DPTN_BUILD_BENCH=ON)" >&2
  exit 1
fi
