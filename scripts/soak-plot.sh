#!/usr/bin/env bash
# Plots a soak summary (scripts/soak.py --out): RSS and KV blocks in use against time.
#   scripts/soak-plot.sh SUMMARY.json OUT.png
set -euo pipefail
summary=${1:?summary json}; out=${2:?png}
command -v gnuplot >/dev/null || { echo "soak-plot: gnuplot not found (make deps installs gnuplot-nox)" >&2; exit 1; }
data=$(mktemp)
trap 'rm -f "$data"' EXIT
python3 - "$summary" > "$data" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for x in s["samples"]:
    print(x["t"] / 60, x["rss_kb"] / 1024, x["kv_blocks_used"] or 0, x["running"] or 0)
PY
gnuplot <<GP
set terminal pngcairo size 900,420 font ",10"
set output "$out"
set title "ptn serve soak: RSS and KV blocks in use (stories260K, 12 workers, --kv-memory 3M)"
set xlabel "minutes"
set ylabel "RSS (MiB)"
set y2label "KV blocks in use / sequences running"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key outside bottom center horizontal
plot "$data" using 1:2 with lines lw 2 title "RSS (MiB)", \
     "$data" using 1:3 axes x1y2 with lines title "KV blocks in use", \
     "$data" using 1:4 axes x1y2 with lines title "sequences running"
GP
echo "soak-plot: wrote $out"
