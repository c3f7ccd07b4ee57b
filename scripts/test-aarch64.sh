#!/usr/bin/env bash
# Cross-builds ptn and the kernel tests for aarch64 (cmake/aarch64-linux-gnu.cmake) and runs
# them under qemu-aarch64 user mode with `-cpu max` (Advanced SIMD, dotprod, i8mm), so every
# NEON level is compared with the reference ops: the kernel tests loop over the levels
# themselves, scripts/verify-levels.sh replays the golden samples of the bundled programs at
# each level. One more verify on an emulated Cortex-A53 (no dotprod) checks that the level
# detection stops at neon there.
#   scripts/test-aarch64.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-aarch64}
jobs=${JOBS:-$(nproc)}
start=$(date +%s)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
kernel_tests=(test_moe test_matmul test_attention test_ops)  # longest first: they run in parallel
cmake --build "$build" -j "$jobs" --target ptn "${kernel_tests[@]}"
echo "test-aarch64: built in $(($(date +%s) - start)) s"

# qemu-aarch64 wrappers (no binfmt registration needed): the newest emulated CPU and an ARMv8.0 one.
cat >"$build/ptn-qemu-max" <<WRAP
#!/bin/sh
exec qemu-aarch64 -cpu max "$PWD/$build/ptn" "\$@"
WRAP
cat >"$build/ptn-qemu-a53" <<WRAP
#!/bin/sh
exec qemu-aarch64 -cpu cortex-a53 "$PWD/$build/ptn" "\$@"
WRAP
chmod +x "$build/ptn-qemu-max" "$build/ptn-qemu-a53"

"$build/ptn-qemu-max" cpu
detected=$("$build/ptn-qemu-max" cpu | sed -n 's/.*(detected \([a-z0-9-]*\)).*/\1/p')
[ "$detected" = neon-i8mm ] || { echo "test-aarch64: qemu -cpu max should detect neon-i8mm, got '$detected'"; exit 1; }
detected=$("$build/ptn-qemu-a53" cpu | sed -n 's/.*(detected \([a-z0-9-]*\)).*/\1/p')
[ "$detected" = neon ] || { echo "test-aarch64: qemu -cpu cortex-a53 should detect neon, got '$detected'"; exit 1; }

# The kernel tests run JOBS at a time: much of each is serial reference code, which qemu runs on
# one host core, so two at once on the 2-core CI machine take about half the time.
run_test() {
  local t=$1 t0 rc=0
  t0=$(date +%s)
  qemu-aarch64 -cpu max "$build/tests/$t" --gtest_brief=1 >"$build/$t.log" 2>&1 || rc=$?
  echo "$rc $(($(date +%s) - t0))" >"$build/$t.status"
}
for t in "${kernel_tests[@]}"; do
  rm -f "$build/$t.status"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_test "$t" &
done
wait
failed=0
for t in "${kernel_tests[@]}"; do
  read -r rc secs <"$build/$t.status" || { rc=1; secs='?'; }
  if [ "$rc" != 0 ]; then
    cat "$build/$t.log"; echo "test-aarch64: FAIL $t (exit $rc)"; failed=1; continue
  fi
  echo "test-aarch64: ok $t ($(grep -c '^\[ *SKIPPED' "$build/$t.log" || true) skip lines, $secs s)"
done
[ "$failed" = 0 ] || exit 1

programs=tests/data/programs
t0=$(date +%s)
scripts/verify-levels.sh "$build/ptn-qemu-max" "$programs/stories260K-q8_0.ptn" "$programs/stories260K-Q3_K_M-gguf.ptn"
out=$("$build/ptn-qemu-a53" verify "$programs/stories260K-q8_0.ptn" -t 1 2>&1) || { echo "$out"; exit 1; }
grep -q "^verify: all samples pass" <<<"$out" || { echo "$out"; echo "test-aarch64: verify on cortex-a53 failed"; exit 1; }
echo "test-aarch64: ok verify on cortex-a53 (neon) in $(($(date +%s) - t0)) s with the levels above"
echo "test-aarch64: all passed in $(($(date +%s) - start)) s"
