#!/usr/bin/env bash
# Replays the golden samples of programs exported on another machine at every SIMD level this
# CPU has (scalar always; avx2, avx2-vnni and avx512 when detected; on aarch64 neon, neon-dotprod and
# neon-i8mm), one thread each. The binary may be a wrapper (qemu-aarch64 for an ARM build).
#   scripts/verify-levels.sh <ptn binary> FILE.ptn...
set -euo pipefail
ptn=$1
shift
detected=$("$ptn" cpu | sed -n 's/.*(detected \([a-z0-9-]*\)).*/\1/p')
case "$detected" in
  avx512) levels="scalar avx2 avx2-vnni avx512" ;;
  avx2-vnni) levels="scalar avx2 avx2-vnni" ;;
  avx2) levels="scalar avx2" ;;
  scalar) levels="scalar" ;;
  neon-i8mm) levels="scalar neon neon-dotprod neon-i8mm" ;;
  neon-dotprod) levels="scalar neon neon-dotprod" ;;
  neon) levels="scalar neon" ;;
  *) echo "verify-levels: cannot read the detected SIMD level from '$ptn cpu'" >&2; exit 1 ;;
esac
case "$detected" in neon*) all="neon neon-dotprod neon-i8mm" ;; *) all="avx2 avx2-vnni avx512" ;; esac
for skipped in $all; do
  case " $levels " in *" $skipped "*) ;; *) echo "verify-levels: skip $skipped: this CPU lacks it (detected $detected)" ;; esac
done
for f in "$@"; do
  for level in $levels; do
    out=$(PTN_SIMD=$level "$ptn" verify "$f" -t 1 2>&1) || { echo "$out"; echo "verify-levels: FAIL $f at $level"; exit 1; }
    # The run must have used the level asked for, and passed every sample.
    grep -q "kernels $level\$" <<<"$(head -1 <<<"$out")" || { echo "$out"; echo "verify-levels: $f did not run at $level"; exit 1; }
    grep -q "^verify: all samples pass" <<<"$out" || { echo "$out"; echo "verify-levels: FAIL $f at $level"; exit 1; }
    echo "verify-levels: ok $f at $level ($(grep -c ' ok$' <<<"$out") sample runs)"
  done
done
