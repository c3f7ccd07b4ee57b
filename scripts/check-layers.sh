#!/usr/bin/env bash
# Checks that every module's DEPS in CMakeLists.txt are exactly the layers its sources include
# (src/<module>/*: `#include "<layer>/..."`), and the ptn binary's libraries those of src/cli.
# Run by ctest (layering_matches_includes); prints each mismatch and exits 1 if there is one.
set -euo pipefail
root="${1:-$(dirname "$0")/..}"
cd "$root"

# Header-only uses allowed without a link, as "module:layer" (none today).
allowed_unlinked=""

included() {  # the layers src/$1 includes, other than itself
  grep -rhoE '#include "[a-z_]+/' "src/$1" 2>/dev/null | sed -E 's/#include "([a-z_]+)\//\1/' | sort -u | grep -vx "$1" || true
}

check() {  # module, declared layers (without the ptn_ prefix)
  local m="$1" declared="$2" bad=0
  for l in $(included "$m"); do
    if ! grep -qw -- "$l" <<<"$declared" && ! grep -qw -- "$m:$l" <<<"$allowed_unlinked"; then
      echo "src/$m includes $l/ but does not link ptn_$l"; bad=1
    fi
  done
  local inc; inc=$(included "$m")
  for l in $declared; do
    if ! grep -qx -- "$l" <<<"$inc"; then echo "src/$m links ptn_$l but includes nothing from src/$l"; bad=1; fi
  done
  return $bad
}

status=0
while read -r line; do
  m=$(sed -E 's/^ptn_module\(([a-z_]+).*/\1/' <<<"$line")
  deps=$(sed -E 's/^ptn_module\([a-z_]+ *(DEPS)?//; s/\).*//' <<<"$line" | tr ' ' '\n' | grep '^ptn_' | sed 's/^ptn_//' | tr '\n' ' ' || true)
  check "$m" "$deps" || status=1
done < <(grep -E '^ptn_module\(' CMakeLists.txt)
cli=$(grep -E '^target_link_libraries\(ptn PRIVATE' CMakeLists.txt | tr ' ' '\n' | grep '^ptn_' | sed 's/^ptn_//' | tr '\n' ' ')
check cli "$cli" || status=1
[ $status -eq 0 ] && echo "every module links exactly the layers it includes"
exit $status
