#!/usr/bin/env bash
# bcaus run 1 (branch h/cp3, 1 GPU): where the causal / window backward's time goes, and two candidates.
#   base = main c647f90 (.carry/base12)
#   v1   = base + K and V on separate barriers (loads K, Q, V, dO), final dQ drain waits for bulk reads only
#   v2   = v1 + a warpgroup's partial step with no visible (query, key) pair skips S^T, dP^T, dV, dK
#   v3   = v2 + window dispatch order: full-length key tiles head by head, then the shorter tail tiles (heads fastest)
# 1. backward selftest of v3
# 2. ncu kernel durations (pre / main / post) of base (none, causal, window 1024, window 4096, none S=1152 B=14) and v2
# 3. ncu full + per-instruction SASS samples of base's main kernel: window 1024 and causal
# 4. CLI kernel times interleaved base/v1/v2 (ABBA-style) on none, causal, window 1024
# 5. run.py interleaved A/B base -> v3 on more backward rows (time left)
set -u
source bench/suite/device_env.sh
D=.carry/bcaus
W=/tmp/bcaus
mkdir -p $W/base $W/v1 $W/v2 $W/v3 $OUT/ncu $OUT/ab
xz -dc .carry/base12/fragmask.xz > $W/base/fragmask; cp .carry/base12/COMMIT $W/base/COMMIT
for v in v1 v2 v3; do xz -dc $D/$v/fragmask.xz > $W/$v/fragmask; cp $D/$v/COMMIT $W/$v/COMMIT; done
chmod +x $W/*/fragmask
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1
echo "base $(cat $W/base/COMMIT) v1 $(cat $W/v1/COMMIT) v2 $(cat $W/v2/COMMIT) v3 $(cat $W/v3/COMMIT)"
R16=1,16,16,16384,16384,128
# ---- 1. selftest v3
# compute-sanitizer on v3 beside it: causal (GQA, D=128), window 300 (D=128), window 100:40 offset (D=64)
mkdir -p $OUT/san
run_san() {  # tool name args...
  local tool=$1 name=$2; shift 2
  local log=$OUT/san/$name-$tool.txt
  timeout 100 compute-sanitizer --tool "$tool" --error-exitcode 99 $W/v3/fragmask "$@" > "$log" 2>&1
  local rc=$?
  printf '%-16s %-9s rc=%-3s %s\n' "$name" "$tool" "$rc" "$(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' "$log" | tail -1)" > "$log.sum"
}
for tool in memcheck racecheck synccheck; do
  run_san $tool causal-gqa-d128 attention --random 1,4,2,1000,1000,128 --backward --causal &
  run_san $tool window300-d128 attention --random 1,2,2,1100,1100,128 --backward --window 300,0 &
  run_san $tool window-off-d64 attention --random 1,2,2,450,500,64 --backward --window 100,40 --diag-offset 30 &
done
timeout 100 $W/v3/fragmask attention --backward --selftest > $OUT/selftest-v3.txt 2>&1
echo "selftest v3 rc=$? t=$(el): $(tail -1 $OUT/selftest-v3.txt)"; grep -E "^FAIL" $OUT/selftest-v3.txt | head -5; grep -E "window" $OUT/selftest-v3.txt | cut -c1-150
wait
echo "sanitizers t=$(el)"; cat $OUT/san/*.sum
# ---- 2. kernel durations under ncu (each command: 1 forward + 1 backward; the three bwd kernels profiled)
cat > $W/cmds.sh <<EOC
for spec in "base none $R16" "base causal $R16 --causal" "base w1024 $R16 --window 1024,0" "base w4096 $R16 --window 4096,0" \
            "base n1152 14,16,16,1152,1152,128" "v2 causal $R16 --causal" "v2 w1024 $R16 --window 1024,0" "v2 w4096 $R16 --window 4096,0" "v2 n1152 14,16,16,1152,1152,128" "v3 w1024 $R16 --window 1024,0"; do
  set -- \$spec; v=\$1; tag=\$2; shp=\$3; shift 3
  echo "CASE \$v \$tag" >&2
  $W/\$v/fragmask bench backward --random \$shp "\$@" --warmup 0 --iters 1 --json > /dev/null
done
EOC
timeout 100 ncu --clock-control none --target-processes all -k regex:fragmask_attention_bwd \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
  --csv bash $W/cmds.sh > $OUT/ncu/durations.csv 2> $OUT/ncu/durations.err
echo "ncu durations rc=$? t=$(el)"
python3 - $OUT/ncu/durations.csv <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.DictReader(lines))
cases = ["base none", "base causal", "base w1024", "base w4096", "base n1152", "v2 causal", "v2 w1024", "v2 w4096", "v2 n1152", "v3 w1024"]
procs, k = [], {}
for r in rows:
    pid, kid = r.get("Process ID", ""), r["ID"]
    if pid not in procs:
        procs.append(pid)
    d = k.setdefault((pid, kid), {"name": r["Kernel Name"]})
    d[r["Metric Name"]] = (r["Metric Value"], r["Metric Unit"])
scale = {"ms": 1000.0, "msecond": 1000.0, "us": 1.0, "usecond": 1.0, "ns": 0.001, "nsecond": 0.001}
print("case          kernel  grid      us    DRAM rd MB  wr MB  SM%   (the second backward call of each process)")
for ci, pid in enumerate(procs):
    ks = sorted([key for key in k if key[0] == pid], key=lambda x: int(x[1]))[-3:]
    c = cases[ci] if ci < len(cases) else "?"
    for key in ks:
        d = k[key]
        def g(m):
            v, u = d.get(m, ("0", ""))
            try:
                v = float(v.replace(",", ""))
            except ValueError:
                return float("nan")
            if m.startswith("gpu__time"):
                return v * scale.get(u, 1.0)
            if u in ("byte",):
                return v / 1e6
            if u in ("Kbyte",):
                return v / 1e3
            if u in ("Gbyte",):
                return v * 1e3
            return v
        nm = d["name"].replace("fragmask_attention_bwd", "main").replace("main_", "")
        print(f"{c:13s} {nm:6s} {d.get('launch__grid_size', ('', ''))[0]:>6s} {g('gpu__time_duration.sum'):9.1f} {g('dram__bytes_read.sum'):9.1f} {g('dram__bytes_write.sum'):7.1f} {g('sm__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}")
PY
# ---- 3. full profile + SASS samples of base's main kernel: window 1024 and causal
for spec in "w1024 --window 1024,0" "causal --causal"; do
  set -- $spec; tag=$1; shift
  timeout 60 ncu --clock-control none --set full --import-source no -k regex:'^fragmask_attention_bwd$' -c 1 -f -o $W/ncu-$tag \
    $W/base/fragmask bench backward --random $R16 "$@" --warmup 0 --iters 1 --json > $OUT/ncu/full-$tag.log 2>&1
  echo "ncu full $tag rc=$? t=$(el)"
  ncu -i $W/ncu-$tag.ncu-rep --page raw --csv > $OUT/ncu/base-$tag.raw.csv 2>/dev/null
  ncu -i $W/ncu-$tag.ncu-rep --page source --print-source sass --csv > $OUT/ncu/base-$tag.sass.csv 2>/dev/null
  ncu -i $W/ncu-$tag.ncu-rep --page details > $OUT/ncu/base-$tag.details.txt 2>/dev/null
  gzip -f $OUT/ncu/base-$tag.raw.csv $OUT/ncu/base-$tag.sass.csv
done
grep -E "^  +(Duration|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Compute \(SM\) Throughput|DRAM Throughput|L2 Hit Rate)" $OUT/ncu/base-*.details.txt | cut -c1-150
# ---- 4. CLI kernel times, interleaved base v1 v2 v3 v3 v2 v1 base
cli() { timeout 40 $W/$1/fragmask bench backward --random $2 "${@:3}" --warmup 5 --iters 20 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("ms_median"))'; }
echo "== CLI kernel times (ms, bench backward --warmup 5 --iters 20), order base v1 v2 v3 v3 v2 v1 base"
for spec in "w1024 $R16 --window 1024,0" "causal $R16 --causal" "none $R16" "gqa-causal 1,32,8,16384,16384,128 --causal" "d64-causal 1,16,16,16384,16384,64 --causal"; do
  set -- $spec; tag=$1; shift
  line="$tag"
  for v in base v1 v2 v3 v3 v2 v1 base; do line="$line $v=$(cli $v "$@")"; done
  echo "$line"
  [ $(el) -gt 185 ] && { echo "stop CLI at t=$(el)"; break; }
done | tee $OUT/cli.txt
echo "cli t=$(el)"
# ---- 5. A/B base -> v3 (time left)
left=$(( 232 - $(el) ))
if [ $left -gt 30 ]; then
  timeout $left python3 bench/suite/run.py --ab $W/base $W/v3 --interleave --rounds 2 --systems fragmask_cli \
    --only '^bwd\.(s16384\.docs12|d256\.s16384\.causal|s8192\.none)$' --budget-s $(( left - 8 )) --out $OUT/ab > $OUT/ab/log.txt 2>&1
  echo "ab rc=$? t=$(el)"
  grep -E "^\| (workload|bwd|---)" $OUT/ab/log.txt | cut -c1-170
fi
echo "== summary"
echo "selftest v3: $(tail -1 $OUT/selftest-v3.txt)"
echo "sanitizer runs: $(cat $OUT/san/*.sum | wc -l), not clean: $(cat $OUT/san/*.sum | grep -vcE 'rc=0 +(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)')"
cat $OUT/cli.txt
echo "total t=$(el)"
