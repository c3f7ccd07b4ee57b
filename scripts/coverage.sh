#!/usr/bin/env bash
# Line and branch coverage of src/ per folder, from a build made with COVERAGE=1 (CMake option
# PTN_COVERAGE) after its tests ran: `scripts/coverage.sh BUILD_DIR` (`make coverage` does all).
# Only files under src/ count: not tests/, fuzz/, generated sources in the build tree or system
# headers. The exception-handling edges gcc adds to every call that may throw, and branches on
# lines without code of their own, are left out so the branch figure is about the code's
# decisions. It prints figures and does not judge them (the goal is 90% lines, 70% branches;
# folders below it are marked); it fails when there is no coverage data to report, because an
# empty table would read as a pass.
# JOBS (default: nproc) gcov processes run at once. The summary stays in BUILD_DIR/coverage.json.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/coverage.sh BUILD_DIR" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" 2>/dev/null && pwd)" || { echo "coverage: build directory $1 not found" >&2; exit 1; }
command -v gcovr >/dev/null || { echo "coverage: gcovr not found (make deps installs it)" >&2; exit 1; }

if ! grep -q '^PTN_COVERAGE:BOOL=ON$' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "coverage: $1 was not configured with PTN_COVERAGE=ON (make test COVERAGE=1 builds one)" >&2
  exit 1
fi
gcda=$(find "$build" -name '*.gcda' | wc -l)
if [ "$gcda" -eq 0 ]; then
  echo "coverage: no coverage data (*.gcda) in $1: run the tests of that build first (make test COVERAGE=1)" >&2
  exit 1
fi

summary="$build/coverage.json"
rm -f "$summary"
# gcovr's relative filters are relative to the working directory: the source root.
cd "$root"
# Counters are not atomic (CMakeLists.txt): racing increments can leave a branch count that gcov
# prints as negative, which gcovr cannot parse. Such records are skipped (counted neither taken
# nor in the total) and their number is printed under the table.
errors="$build/coverage-parse-errors.txt"
gcovr --root "$root" --filter 'src/' \
  --exclude-throw-branches --exclude-unreachable-branches --gcov-ignore-parse-errors \
  -j "${JOBS:-$(nproc)}" --json-summary "$summary" "$build" >/dev/null 2>"$errors"
skipped=$(grep -c 'UnknownLineType' "$errors" || true)

python3 - "$summary" "$gcda" "$skipped" <<'EOF'
import json, sys
path, gcda, skipped = sys.argv[1], sys.argv[2], sys.argv[3]
files = json.load(open(path))["files"]
folders = {}
for f in files:
    parts = f["filename"].split("/")
    if parts[0] != "src":
        sys.exit(f"coverage: {f['filename']} is outside src/ but was counted (filter broken)")
    key = "/".join(parts[:2]) if len(parts) > 2 else "src"
    t = folders.setdefault(key, [0, 0, 0, 0, 0])
    t[0] += f["line_covered"]; t[1] += f["line_total"]
    t[2] += f["branch_covered"]; t[3] += f["branch_total"]; t[4] += 1
total = [sum(t[i] for t in folders.values()) for i in range(5)]
if total[1] == 0:
    sys.exit(f"coverage: {gcda} .gcda files but no line of src/ in them (wrong build or source root?)")

def pct(c, n):
    return f"{100.0 * c / n:5.1f}%" if n else "    -"

def row(name, t):
    below = []
    if t[1] and t[0] < 0.9 * t[1]: below.append("lines")
    if t[3] and t[2] < 0.7 * t[3]: below.append("branches")
    mark = "below goal: " + ", ".join(below) if below else ""
    return (f"{name:<16} {t[4]:>5}  {t[0]:>6}/{t[1]:<6} {pct(t[0], t[1])}  "
            f"{t[2]:>6}/{t[3]:<6} {pct(t[2], t[3])}  {mark}").rstrip()

print(f"{'folder':<16} {'files':>5}  {'lines':^13} {'%':>6}  {'branches':^13} {'%':>6}")
for name in sorted(folders):
    print(row(name, folders[name]))
print(row("total", total))
print(f"(goal: 90% lines, 70% branches; throw and unreachable branches excluded; {gcda} .gcda files; "
      f"{skipped} gcov records with negative counts skipped)")
EOF
