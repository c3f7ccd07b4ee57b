#!/usr/bin/env bash
# Runs the server fault tests (tests/serve/test_serve_faults.cpp), reads the libFuzzer
# statistics of the fuzz targets, and writes docs/reliability.md from the figures of this run.
#
#   scripts/reliability.sh [BUILD_DIR=build]
#
# Run it after `make build` (it builds test_serve_faults and ptn in BUILD_DIR if they are
# missing or stale). Fuzzing figures come from FUZZ_BUILD/fuzz-<target>.log, the logs that
# `make fuzz` (scripts/fuzz.sh) leaves; with FUZZ_SECONDS=N the script first runs
# `scripts/fuzz.sh FUZZ_BUILD N` itself (needs clang; builds the fuzz targets).
#   FUZZ_BUILD   default build-fuzz
#   FUZZ_SECONDS default unset: only read existing logs
#   SAN_BUILD    optional: a build directory configured with -DPTN_SANITIZE=ON (e.g. build-san from
#                `make build SANITIZE=1`); its test_serve_faults is built and run too (ASan + UBSan)
#   OUT          default docs/reliability.md
#   JOBS         build parallelism (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
OUT=${OUT:-docs/reliability.md}
JOBS=${JOBS:-1}

[ -f "$BUILD/CMakeCache.txt" ] || { echo "reliability: no $BUILD/CMakeCache.txt; run 'make build' first" >&2; exit 1; }
cmake --build "$BUILD" --target test_serve_faults -j "$JOBS" >/dev/null
exe="$BUILD/tests/test_serve_faults"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- fuzzing ---------------------------------------------------------------------------------
fuzz_rc=0
if [ -n "${FUZZ_SECONDS:-}" ]; then
  JOBS=$JOBS scripts/fuzz.sh "$FUZZ_BUILD" "$FUZZ_SECONDS" >"$tmp/fuzz.out" 2>&1 || fuzz_rc=$?
  echo "reliability: fuzz.sh exit $fuzz_rc"
fi
fuzz_table="$tmp/fuzz.md"
: >"$fuzz_table"
fuzz_logs=0
for log in "$FUZZ_BUILD"/fuzz-*.log; do
  [ -f "$log" ] || continue
  fuzz_logs=$((fuzz_logs + 1))
  t=$(basename "$log" .log); t=${t#fuzz-}
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  secs=$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+' | tail -1)
  seeds=$(grep -oE 'seed corpus: files: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  final=$(grep -E '(DONE|pulse|NEW|REDUCE) +cov:' "$log" | tail -1)
  cov=$(echo "$final" | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+')
  corp=$(echo "$final" | grep -oE 'corp: [0-9]+/[0-9]+[A-Za-z]*' | sed 's/corp: //')
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if grep -qE 'ERROR: (libFuzzer|AddressSanitizer|UndefinedBehaviorSanitizer)|SUMMARY: (Address|UndefinedBehavior)Sanitizer|runtime error' "$log"; then
    verdict="**crash** (see $log)"
  else
    verdict="no crash"
  fi
  when=$(date -u -r "$log" '+%Y-%m-%d %H:%M')
  echo "| $t | ${runs:-?} | ${secs:-?} | ${seeds:-?} | ${corp:-?} | ${cov:-?} | ${rss:-?} | $verdict | $when |" >>"$fuzz_table"
done

# --- fault tests -------------------------------------------------------------------------------
echo "reliability: running $exe"
start=$(date +%s)
rc=0
"$exe" --gtest_color=no >"$tmp/faults.log" 2>&1 || rc=$?
secs=$(( $(date +%s) - start ))
grep '^RELIABILITY ' "$tmp/faults.log" | sed 's/^RELIABILITY //' >"$tmp/rel.txt" || true
san_line=""
if [ -n "${SAN_BUILD:-}" ]; then
  echo "reliability: running the fault tests under ASan + UBSan ($SAN_BUILD)"
  cmake --build "$SAN_BUILD" --target test_serve_faults -j "$JOBS" >/dev/null
  san_rc=0
  san_start=$(date +%s)
  "$SAN_BUILD/tests/test_serve_faults" --gtest_color=no >"$tmp/san.log" 2>&1 || san_rc=$?
  san_ok=$(grep -c '^\[       OK \]' "$tmp/san.log" || true)
  san_reports=$(grep -cE '^(SUMMARY: (Address|UndefinedBehavior)Sanitizer|.*runtime error:)' "$tmp/san.log" || true)
  san_line="Under AddressSanitizer + UndefinedBehaviorSanitizer (\`$SAN_BUILD\`): $san_ok tests passed, exit status $san_rc, $san_reports sanitizer reports, in $(( $(date +%s) - san_start )) s."
  [ "$san_rc" -eq 0 ] || rc=$san_rc
fi
passed=$(grep -c '^\[       OK \]' "$tmp/faults.log" || true)
failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$tmp/faults.log" || true)
failed_names=$(grep '^\[  FAILED  \] [A-Za-z]' "$tmp/faults.log" | sed 's/^\[  FAILED  \] //; s/ (.*//' | sort -u | tr '\n' ' ' || true)

# key=value fields of the lines of one kind, as "k=v k=v" per line
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p"; }
lines() { grep "^kind=$1 " "$tmp/rel.txt" || true; }

{
  echo "# ptn reliability report"
  echo
  echo "Produced by \`scripts/reliability.sh $BUILD\` on $(date -u '+%Y-%m-%d %H:%M UTC'), commit"
  echo "\`$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\`, on a machine with $(nproc) CPUs (load average"
  echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end). Every figure below comes from that run; run the script again to"
  echo "refresh them."
  echo
  echo "## Fuzzing"
  echo
  if [ "$fuzz_logs" -eq 0 ]; then
    echo "No fuzz logs in \`$FUZZ_BUILD/\` (run \`make fuzz FUZZ_SECONDS=N\` or this script with"
    echo "\`FUZZ_SECONDS=N\`)."
  else
    if [ -n "${FUZZ_SECONDS:-}" ]; then
      echo "\`scripts/fuzz.sh $FUZZ_BUILD $FUZZ_SECONDS\` ran each libFuzzer target (ASan + UBSan) for $FUZZ_SECONDS s"
      echo "(exit status $fuzz_rc). Figures from libFuzzer's final statistics in \`$FUZZ_BUILD/fuzz-<target>.log\`:"
    else
      echo "Figures from the libFuzzer logs that \`scripts/fuzz.sh\` (\`make fuzz\`) left in \`$FUZZ_BUILD/\`, one run"
      echo "per target (ASan + UBSan) of the length in the seconds column, dated in the last column:"
    fi
    echo
    echo "| target | runs | seconds | seed inputs | corpus (files/size) | coverage (edges) | peak RSS MB | result | log date (UTC) |"
    echo "|---|---:|---:|---:|---|---:|---:|---|---|"
    cat "$fuzz_table"
    echo
    echo "Targets: GGUF reader, safetensors reader and shard index, config.json mapping, .ptn loader"
    echo "(both verification levels, and manifests), tokenizer.json loading + tokenizing arbitrary"
    echo "bytes, chat template rendering, and the server's request body parsing and validation"
    echo "(see fuzz/README.md)."
  fi
  echo
  echo "## Server fault tests"
  echo
  echo "\`$exe\`: $passed passed, $failed failed${failed_names:+ ($failed_names)}, in $secs s. The tests run"
  echo "\`ptn serve\` in process on loopback (and the real binary for SIGTERM), on stories260K exported"
  echo "in the test (context 512, and 8192 for long generations)."
  [ -z "$san_line" ] || { echo; echo "$san_line"; }
  echo
  echo "### Requests sent and how they ended"
  echo
  echo "Outcome: the HTTP status received; \`closed\`: the server closed the connection without a"
  echo "status line; \`abandoned\`: the test client left on purpose before the answer; \`hung\`: no"
  echo "answer within the test's limit (none expected)."
  echo
  echo "| test group | outcome | requests |"
  echo "|---|---|---:|"
  lines request | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} print "| " v["group"] " | " v["outcome"] " | " v["count"] " |"}'
  echo
  echo "Totals by outcome:"
  echo
  echo "| outcome | requests |"
  echo "|---|---:|"
  lines request | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} n[v["outcome"]]+=v["count"]}
    END {for (o in n) print "| " o " | " n[o] " |"}' | sort
  lines request | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} t+=v["count"]} END {print "| **all** | **" t "** |"}'
  echo
  echo "### Disconnects"
  echo
  echo "Clients that close (FIN) or reset (RST) their connection while their request runs: tokens"
  echo "generated before the request stopped (of max_tokens), and the time from the close until"
  echo "\`ptn_running_sequences\` read 0 (prefill cases: 2 prompt rows per step, closed once the"
  echo "prompt held the given number of KV blocks; no token may be generated):"
  echo
  echo "| case | tokens generated | of max_tokens | cancelled after (ms) |"
  echo "|---|---:|---:|---:|"
  lines cancel | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]}
    extra = v["blocks_at_close"] != "" ? " (closed at " v["blocks_at_close"] " blocks)" : ""
    print "| " v["test"] extra " | " v["generated"] " | " v["of"] " | " v["cancel_ms"] " |"}'
  echo
  echo "A request still queued behind a running one (--parallel 1) leaves the queue when its client"
  echo "closes (\`disconnect_in_queue\` in the request table)."
  echo
  echo "### Slow, unfinished and oversized requests"
  echo
  echo "| case | closed after (s) | answer |"
  echo "|---|---:|---|"
  lines unfinished | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} print "| " v["case"] " | " v["closed_after_s"] " | " v["status"] " |"}'
  lines slow_client | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} print "| slow client: " v["bytes"] " bytes, one per " v["byte_interval_ms"] " ms | - | " v["status"] " |"}'
  echo
  echo "(read timeout 1 s, whole-request deadline 3 s in the trickle case; an idle connection is"
  echo "closed after the 5 s keep-alive timeout.)"
  echo
  echo "| oversized case | answer |"
  echo "|---|---|"
  lines oversized | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} print "| " v["case"] " | " v["status"] " |"}'
  echo
  echo "### 200 concurrent connections, --max-queue 32, --parallel 8"
  echo
  echo "| round | connections | 200 | 503 + Retry-After | other | seconds | process RSS after (KiB) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  lines load | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} print "| " v["round"] " | " v["connections"] " | " v["ok"] " | " v["busy_503"] " | " v["other"] " | " v["seconds"] " | " v["rss_kb"] " |"}'
  echo
  lines rss | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]}
    printf "Test process RSS: %s KiB before the load, %s KiB after round 1, %s KiB after round 2 (%+d KiB in round 2).\n",
      v["before_kb"], v["after_round1_kb"], v["after_round2_kb"], v["after_round2_kb"] - v["after_round1_kb"]}'
  echo
  echo "### Sampling values, context boundary, cache exhaustion, shutdown"
  echo
  lines sampling | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]}
    print "- Pathological sampling values: " v["cases"] " cases, " v["ok_200"] " answered 200 with a valid completion, " v["refused_400"] " refused with a 400 naming the field (temperature 1e-30 and 1e-45, top_p 1e-9, top_k 2^31-1, min_p 1, penalties at their bounds, logit_bias +-100 on every token, seed extremes and logprobs 20 are served; 1e30 values, logit_bias +-1e30, top_k 2^63-1, seed 2^64-1 are refused)."}'
  echo "- Context boundary: a prompt of context - 1 tokens gets one token (\`length\`); context and"
  echo "  context + 1 tokens get 400 \`context_length_exceeded\` naming \`prompt\`; with the model's"
  echo "  context (512) and with a KV cache of 96 tokens setting it."
  lines cache_exhaustion | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]}
    print "- Cache exhaustion: " v["requests"] " concurrent greedy requests of up to 70 tokens with --kv-memory " v["kv_memory_bytes"] " bytes (" v["cache_tokens"] " tokens): " v["preemptions"] " preemptions in " v["concurrent_rounds"] " concurrent round(s), every request completed with the same text as when sent alone."}'
  lines sigterm | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]}
    print "- SIGTERM to `ptn serve` with " v["streams"] " streams open (2 of 200 tokens that finish within the 4 s deadline, 2 of 8000 that cannot): exit code " v["exit_code"] "; every stream a complete chunked body of well-formed SSE events ending in `[DONE]` (the unfinished ones with an error event). The same in process with 5 streams."}'
  echo
  echo "### Leaks"
  echo
  echo "After every test the server answered \`/health\` and \`ptn_kv_blocks_used\` returned to its"
  echo "baseline once the engine was idle:"
  echo
  echo "| after | KV blocks in use before | after |"
  echo "|---|---:|---:|"
  lines leak | awk '{delete v; for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} print "| " v["test"] " | " v["blocks_before"] " | " v["blocks_after"] " |"}'
  echo
  echo "## Not covered"
  echo
  echo "- Clients that half-close their connection after sending a request are treated as gone."
  echo "- HTTP worker threads are --parallel + --max-queue + 4 (at most 512): connections beyond"
  echo "  them are accepted and wait in the HTTP library's task queue until a worker is free, and an"
  echo "  idle or slow connection holds its worker for up to the keep-alive timeout (5 s) or the"
  echo "  request deadline; there is no per-client connection limit."
} >"$OUT"

echo "reliability: wrote $OUT (fault tests: $passed passed, $failed failed)"
[ "$rc" -eq 0 ] || { echo "reliability: test_serve_faults failed (exit $rc); log:" >&2; tail -50 "$tmp/faults.log" >&2; }
exit $rc
