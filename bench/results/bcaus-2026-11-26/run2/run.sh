#!/usr/bin/env bash
# bcaus run 2 (branch h/cp3, 1 GPU).
#   base = main c647f90 (.carry/base12)
#   v4   = K and V loaded with the first step's Q and dO on their full barriers (order K, Q, V, dO), the final
#          dQ drain waits for the bulk reads only, window dispatch: full-length key tiles head by head, cut tiles last
#   v4nd = v4 without the dispatch order (index order)
#   v5   = v4 + the next wave's K and V tiles prefetched into L2 (experiment; ncu durations only)
# 1. backward selftest of v4 + compute-sanitizer memcheck/racecheck/synccheck (causal GQA d128, window d128, window+offset d64)
# 2. ncu kernel durations (pre / main / post), one cold call each: base / v4nd / v4 / v5 window 1024; base / v4 / v5 causal, none S=1152 B=14
# 3. interleaved A/B base -> v4 (run.py): causal + window 1024 (3 pairs), then other backward rows (2 pairs, time left)
set -u
source bench/suite/device_env.sh
D=.carry/bcaus
W=/tmp/bcaus
mkdir -p $W/base $W/v4 $W/v4nd $W/v5 $OUT/ncu $OUT/ab1 $OUT/ab2 $OUT/san
xz -dc .carry/base12/fragmask.xz > $W/base/fragmask; cp .carry/base12/COMMIT $W/base/COMMIT
for v in v4 v4nd v5; do xz -dc $D/$v/fragmask.xz > $W/$v/fragmask; cp $D/$v/COMMIT $W/$v/COMMIT; done
chmod +x $W/*/fragmask
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1
echo "base $(cat $W/base/COMMIT) v4 $(cat $W/v4/COMMIT) v4nd $(cat $W/v4nd/COMMIT) v5 $(cat $W/v5/COMMIT)"
R16=1,16,16,16384,16384,128
# ---- 1. selftest + sanitizers of v4
run_san() {  # tool name args...
  local tool=$1 name=$2; shift 2
  local log=$OUT/san/$name-$tool.txt
  timeout 100 compute-sanitizer --tool "$tool" --error-exitcode 99 $W/v4/fragmask "$@" > "$log" 2>&1
  local rc=$?
  printf '%-16s %-9s rc=%-3s %s\n' "$name" "$tool" "$rc" "$(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' "$log" | tail -1)" > "$log.sum"
}
for tool in memcheck racecheck synccheck; do
  run_san $tool causal-gqa-d128 attention --random 1,4,2,1000,1000,128 --backward --causal &
  run_san $tool window300-d128 attention --random 1,2,2,1100,1100,128 --backward --window 300,0 &
  run_san $tool window-off-d64 attention --random 1,2,2,450,500,64 --backward --window 100,40 --diag-offset 30 &
done
timeout 100 $W/v4/fragmask attention --backward --selftest > $OUT/selftest-v4.txt 2>&1
echo "selftest v4 rc=$? t=$(el): $(tail -1 $OUT/selftest-v4.txt)"; grep -E "^FAIL" $OUT/selftest-v4.txt | head -5; grep -E "window" $OUT/selftest-v4.txt | cut -c1-150
wait
echo "sanitizers t=$(el)"; cat $OUT/san/*.sum
# ---- 2. kernel durations under ncu (each command: 1 forward + 2 backward calls; the second call's three kernels)
cat > $W/cmds.sh <<EOC
for spec in "base w1024 $R16 --window 1024,0" "v4nd w1024 $R16 --window 1024,0" "v4 w1024 $R16 --window 1024,0" \
            "v5 w1024 $R16 --window 1024,0" "base causal $R16 --causal" "v4 causal $R16 --causal" "v5 causal $R16 --causal" \
            "base n1152 14,16,16,1152,1152,128" "v4 n1152 14,16,16,1152,1152,128" "v5 n1152 14,16,16,1152,1152,128"; do
  set -- \$spec; v=\$1; tag=\$2; shp=\$3; shift 3
  $W/\$v/fragmask bench backward --random \$shp "\$@" --warmup 0 --iters 1 --json > /dev/null
done
EOC
timeout 95 ncu --clock-control none --target-processes all -k regex:fragmask_attention_bwd \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
  --csv bash $W/cmds.sh > $OUT/ncu/durations.csv 2> $OUT/ncu/durations.err
echo "ncu durations rc=$? t=$(el)"
python3 - $OUT/ncu/durations.csv > $OUT/ncu/durations.txt <<'PY'
import csv, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.DictReader(lines))
cases = ["base w1024", "v4nd w1024", "v4 w1024", "v5 w1024", "base causal", "v4 causal", "v5 causal", "base n1152", "v4 n1152", "v5 n1152"]
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
            return v / 1e6 if u == "byte" else (v / 1e3 if u == "Kbyte" else (v * 1e3 if u == "Gbyte" else v))
        nm = d["name"].replace("fragmask_attention_bwd", "main").replace("main_", "")
        print(f"{c:13s} {nm:6s} {d.get('launch__grid_size', ('', ''))[0]:>6s} {g('gpu__time_duration.sum'):9.1f} {g('dram__bytes_read.sum'):9.1f} {g('dram__bytes_write.sum'):7.1f} {g('sm__throughput.avg.pct_of_peak_sustained_elapsed'):5.1f}")
PY
grep -E " main " $OUT/ncu/durations.txt
# ---- 3. interleaved A/B base -> v4
timeout 95 python3 bench/suite/run.py --ab $W/base $W/v4 --interleave --rounds 3 --systems fragmask_cli \
  --only '^bwd\.s16384\.(causal|window1024)$' --budget-s 85 --out $OUT/ab1 > $OUT/ab1/log.txt 2>&1
echo "ab1 rc=$? t=$(el)"
left=$(( 234 - $(el) ))
if [ $left -gt 25 ]; then
  timeout $left python3 bench/suite/run.py --ab $W/base $W/v4 --interleave --rounds 2 --systems fragmask_cli \
    --only '^bwd\.(gqa\.s16384\.causal|d64\.s16384\.causal|s16384\.none|d256\.s16384\.causal|s16384\.docs12|s8192\.none|d64\.s16384\.none)$' \
    --budget-s $(( left - 8 )) --out $OUT/ab2 > $OUT/ab2/log.txt 2>&1
  echo "ab2 rc=$? t=$(el)"
fi
rm -f $W/*/fragmask
echo "== summary (A = base c647f90, B = v4; B/A below 1: B faster)"
echo "selftest v4: $(tail -1 $OUT/selftest-v4.txt)"
echo "sanitizer runs: $(cat $OUT/san/*.sum | wc -l), not clean: $(cat $OUT/san/*.sum | grep -vcE 'rc=0 +(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)')"
grep -E " main " $OUT/ncu/durations.txt
grep -E "^\| (workload|bwd)" $OUT/ab1/log.txt | cut -c1-150
grep -E "^\| bwd" $OUT/ab2/log.txt | cut -c1-150
grep -iE "^# (skipped|failed)|not in both|Traceback" $OUT/ab1/log.txt $OUT/ab2/log.txt | head -5
echo "total t=$(el)"
