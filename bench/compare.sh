#!/usr/bin/env bash
# Runs llama.cpp's llama-bench (or ik_llama.cpp's) and `ptn bench` alternately on the same GGUF
# files and thread count, and prints the ratios ptn / llama.cpp for pp and tg, plus a PNG plot.
# llama-bench is built by the user from llama.cpp or ik_llama.cpp; it is not part of this repo.
# With --batched-bench PATH (llama.cpp's llama-batched-bench) it also compares the aggregate
# decode speed of 1, 2, 4 and 8 sequences (each with a 128-token prompt, 128 generated tokens).
# With --depth D both engines run pp and tg after D tokens already in the cache (llama-bench -d,
# ptn bench -d): the speed at depth, where attention over the long cache costs most.
#
#   bench/compare.sh --llama-bench PATH [--ptn build/ptn] [-t 2] [-p 512] [-n 128] [-r 3]
#                    [--rounds 2] [--depth D] [--llama-args "-fa 1"] [--ptn-args "--f16-as-bf16"]
#                    [--batched-bench PATH] [--npl 1,2,4,8] [--plot out.png] [--label NAME] MODEL.gguf...
#
#   --label NAME  names the other engine in the tables, the ratio line and the plot legend
#                 (default "llama.cpp"; e.g. --label ik_llama.cpp)
set -euo pipefail
ptn=build/ptn; llama=""; threads=2; np=512; ng=128; reps=3; rounds=2; largs=""; pargs=""; plot=""
batched=""; npl=1,2,4,8; label=llama.cpp; depth=0
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bench) llama=$2; shift 2 ;;
    --ptn) ptn=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) np=$2; shift 2 ;;
    -n) ng=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --llama-args) largs=$2; shift 2 ;;
    --ptn-args) pargs=$2; shift 2 ;;
    --batched-bench) batched=$2; shift 2 ;;
    --npl) npl=$2; shift 2 ;;
    --plot) plot=$2; shift 2 ;;
    --label) label=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ -n "$llama" ] && [ -x "$llama" ] || { echo "compare.sh: --llama-bench PATH to a built llama-bench is required" >&2; exit 2; }
[ -z "$batched" ] || [ -x "$batched" ] || { echo "compare.sh: --batched-bench $batched is not executable" >&2; exit 2; }
[ ${#models[@]} -gt 0 ] || { echo "compare.sh: give at least one GGUF file" >&2; exit 2; }
case "$depth" in ''|*[!0-9]*) echo "compare.sh: --depth must be a number of tokens" >&2; exit 2 ;; esac
dflag=""; [ "$depth" = 0 ] || dflag="-d $depth"  # only when asked: older llama-bench builds have no -d
# The label goes into the gnuplot script inside double quotes.
case "$label" in
  ""|*[\"\\]*|*$'\n'*) echo "compare.sh: --label must be non-empty, without quotes, backslashes or newlines" >&2; exit 2 ;;
esac
command -v python3 >/dev/null || { echo "compare.sh: needs python3" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for m in "${models[@]}"; do
  for r in $(seq 1 "$rounds"); do
    # Alternate the engines so both see the same machine conditions.
    "$llama" -m "$m" -t "$threads" -p "$np" -n "$ng" $dflag -r "$reps" -o json $largs > "$out/llama.$r.$(basename "$m").json" \
      2> "$out/llama.err" || { cat "$out/llama.err" >&2; exit 1; }
    "$ptn" bench -m "$m" -t "$threads" -p "$np" -n "$ng" $dflag -r "$reps" --json $pargs > "$out/ptn.$r.$(basename "$m").jsonl" \
      2> "$out/ptn.err" || { cat "$out/ptn.err" >&2; exit 1; }
    if [ -n "$batched" ]; then
      maxpl=$(echo "$npl" | tr ',' '\n' | sort -n | tail -1)
      "$batched" -m "$m" -t "$threads" -c $(( (128 + 128 + 16) * maxpl )) -b 2048 -ub 512 -npp 128 -ntg 128 \
        -npl "$npl" --output-format jsonl $largs > "$out/bb-llama.$r.$(basename "$m").txt" 2> "$out/llama.err" \
        || { cat "$out/llama.err" >&2; exit 1; }
      "$ptn" bench -m "$m" -t "$threads" -p 0 -n 0 -r 1 --batch "$npl" --batch-prompt 128 --batch-gen 128 --json $pargs \
        > "$out/bb-ptn.$r.$(basename "$m").txt" 2> "$out/ptn.err" || { cat "$out/ptn.err" >&2; exit 1; }
    fi
  done
done
python3 - "$out" "$np" "$ng" "$plot" "$label" "$depth" "${models[@]}" <<'PY'
import json, os, statistics, sys
out, np_, ng, plot, label, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
models = sys.argv[7:]
at = f" @ d{depth}" if depth else ""
w = max(10, len(label) + 3)  # width of the other engine's columns: "<label> pp"
rows = []
for m in models:
    b = os.path.basename(m)
    ll = {"pp": [], "tg": []}; pt = {"pp": [], "tg": []}
    for f in sorted(os.listdir(out)):
        if not f.endswith(b + ".json") and not f.endswith(b + ".jsonl"): continue
        path = os.path.join(out, f)
        if f.startswith("llama."):
            for x in json.load(open(path)):
                kind = "pp" if x.get("n_prompt", 0) > 0 and x.get("n_gen", 0) == 0 else "tg"
                ll[kind].append(x["avg_ts"])
        else:
            for line in open(path):
                x = json.loads(line)
                pt["pp" if x["test"].startswith("pp") else "tg"].append(x["mean_tps"])
    med = lambda v: statistics.median(v) if v else float("nan")
    rows.append((b, med(ll["pp"]), med(pt["pp"]), med(ll["tg"]), med(pt["tg"])))
print(f"{'model':40s} {label + ' pp':>{w}s} {'ptn pp':>10s} {'ratio':>6s} {label + ' tg':>{w}s} {'ptn tg':>10s} {'ratio':>6s}")
for b, lp, pp, lt, tt in rows:
    print(f"{b:40s} {lp:{w}.2f} {pp:10.2f} {pp/lp:6.2f} {lt:{w}.2f} {tt:10.2f} {tt/lt:6.2f}")
print(f"(medians over rounds; pp{np_}{at} and tg{ng}{at} tokens/s; ratio = ptn / {label})")
# Batched decode: llama-batched-bench's speed_tg (all sequences' generated tokens / decode time)
# against ptn bench's batchN (the same quantity after a 128-token prompt per sequence).
bb = [f for f in os.listdir(out) if f.startswith("bb-")]
if bb:
    print(f"\n{'model':40s} {'seqs':>4s} {label + ' tg':>{w}s} {'ptn tg':>10s} {'ratio':>6s}  (aggregate tokens/s, 128 prompt + 128 generated each)")
    for m in models:
        b = os.path.basename(m)
        ll, pt = {}, {}
        for f in bb:
            if not f.endswith(b + ".txt"): continue
            for line in open(os.path.join(out, f)):
                line = line.strip()
                if not line.startswith("{"): continue
                x = json.loads(line)
                if f.startswith("bb-llama.") and "speed_tg" in x: ll.setdefault(int(x["pl"]), []).append(x["speed_tg"])
                elif f.startswith("bb-ptn.") and x.get("test", "").startswith("batch"):
                    pt.setdefault(int(x["test"][5:]), []).append(x["mean_tps"])
        for n in sorted(set(ll) | set(pt)):
            l = statistics.median(ll[n]) if n in ll else float("nan"); p = statistics.median(pt[n]) if n in pt else float("nan")
            print(f"{b:40s} {n:4d} {l:{w}.2f} {p:10.2f} {p/l:6.2f}")
if plot:
    dat = os.path.join(out, "plot.dat")
    with open(dat, "w") as f:
        for b, lp, pp, lt, tt in rows:
            f.write(f'"{b}" {lp} {pp} {lt} {tt}\n')
    gp = os.path.join(out, "plot.gp")
    with open(gp, "w") as f:
        # noenhanced: underscores in file and engine names stay underscores, not subscripts;
        # headroom above the tallest bar keeps the legend off the bars.
        f.write(f'set terminal pngcairo size 1000,500 noenhanced\nset output "{plot}"\nset style data histograms\n'
                'set style fill solid\nset yrange [0:*]\nset offsets 0,0,graph 0.25,0\nset ylabel "tokens/s"\n'
                'set xtics rotate by -20\nset key top left\n'
                f'set multiplot layout 1,2\nset title "pp{np_}{at}"\nplot "{dat}" using 2:xtic(1) title "{label}", "" using 3 title "ptn"\n'
                f'set title "tg{ng}{at}"\nplot "{dat}" using 4:xtic(1) title "{label}", "" using 5 title "ptn"\nunset multiplot\n')
    os.system(f"gnuplot {gp}")
    print("plot:", plot)
PY
