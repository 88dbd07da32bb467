#!/usr/bin/env bash
# rsel run 2: base (2779647) vs c1 (1729133: the mask words as S's starting value in the
# overlapped loops). (A) interleaved rounds of base-none, base-r50, c1-r50 (order rotated) and
# topk8 / r10 pairs; (B) compute-sanitizer on the tile-list forwards c1 changes; (C) Nsight
# Compute of base none, base r50, c1 r50 (raw metrics); (D) the tile-list selftest cases.
set -u
C=.carry/rsel
OUT=${OUT:-/tmp/out_rsel}; mkdir -p "$OUT"
W=/tmp/rsel; rm -rf $W; mkdir -p $W/san
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
xz -dc .carry/base/fragmask.xz > $W/base
xz -dc $C/fragmask.xz > $W/c1
chmod +x $W/base $W/c1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
LOG=$W/log.txt
R="--random 1,16,16,16384,16384,128"
bench() { # BIN ROW ARGS... -> appends "ROW BIN ms ms_wall" to $W/times.txt
  local bin=$1 row=$2; shift 2
  [ "$(el)" -lt 100 ] || { echo "$row $bin SKIP" >> $LOG; return; }
  local t=$(date +%s%N)
  local ms
  ms=$(timeout 60 $W/$bin bench attention $R --json --warmup 5 --iters 30 "$@" 2>>$LOG | tail -1 |
       python3 -c 'import sys,json; print("%.4f" % json.loads(sys.stdin.read())["ms_median"])' 2>>$LOG)
  echo "$row $bin ${ms:-FAIL} $(( ($(date +%s%N) - t) / 1000000 ))" | tee -a $W/times.txt >> $LOG
}
# (A) timing
for r in 0 1 2 3 4 5; do
  case $((r % 3)) in 0) o="n b c";; 1) o="c n b";; 2) o="b c n";; esac
  for x in $o; do
    case $x in n) bench base none;; b) bench base r50 --synthetic-mask random:0.5;; c) bench c1 r50 --synthetic-mask random:0.5;; esac
  done
done
for r in 0 1 2; do
  if [ $((r % 2)) = 0 ]; then o="base c1"; else o="c1 base"; fi
  for b in $o; do bench $b topk8 --synthetic-mask topk:0.125; done
  for b in $o; do bench $b r10 --synthetic-mask random:0.1; done
done
echo "timing done $(el) s"
# (B) compute-sanitizer (the cases of bench/suite/sanitize.sh that run c1's changed kernels)
fwd="attention --random 1,2,2,512,512,128"
cases=(
  "fwd-random50|$fwd --synthetic-mask random:0.5"
  "fwd-gqa-blocksparse|attention --random 1,4,2,512,512,128 --synthetic-mask blocksparse:0.3:0.5"
  "fwd-64tok-shared-kv|attention --random 1,4,2,900,700,128 --block 64x64/2x2 --synthetic-mask random:0.3"
)
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    [ "$(el)" -lt 165 ] || { echo "$name $tool skipped (time)" >> $W/san/summary.txt; continue; }
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $W/c1 $args > $W/san/$name-$tool.txt 2>&1
    rc=$?
    s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\|LEAK\) SUMMARY: .*' $W/san/$name-$tool.txt | tail -1)
    printf '%-20s %-9s rc=%-3s %s\n' "$name" "$tool" "$rc" "${s:-no summary line}" >> $W/san/summary.txt
  done
done
echo "sanitizers done $(el) s"
# (C) ncu, one launch each
for spec in "base none" "base r50 --synthetic-mask random:0.5" "c1 r50 --synthetic-mask random:0.5"; do
  set -- $spec; bin=$1; row=$2; shift 2
  [ "$(el)" -lt 200 ] || break
  timeout 30 ncu --clock-control none --kernel-name regex:^fragmask_attention_fwd --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum \
    --csv --page raw $W/$bin bench attention $R --warmup 1 --iters 1 "$@" > $W/ncu-$bin-$row.csv 2>$W/ncu-$bin-$row.err
  echo "ncu $bin $row rc=$? $(el) s"
done
# (D) tile-list selftest cases of c1, with what time is left
left=$(( 228 - $(el) ))
if [ $left -gt 5 ]; then
  timeout $left $W/c1 attention --selftest --cases blocks > $W/selftest.txt 2>&1
  echo "selftest --cases blocks rc=$? pass=$(grep -c PASS $W/selftest.txt) fail=$(grep -c FAIL $W/selftest.txt) $(tail -1 $W/selftest.txt | cut -c1-80)"
fi
(cd $W && tar czf "$OUT/rsel2.tgz" times.txt log.txt selftest.txt san ncu-*.csv ncu-*.err 2>/dev/null)
cat $W/san/summary.txt
python3 - $W/times.txt <<'PY'
import sys, statistics as st, collections
d = collections.defaultdict(list)
seq = []
for l in open(sys.argv[1]):
    row, b, ms, wall = l.split()
    if ms != "FAIL":
        d[(row, b)].append(float(ms)); seq.append((row, b, float(ms)))
for r in sorted({r for r, _ in d}):
    print(f"{r:6s} " + " | ".join(f"{b} {st.median(d[(r, b)]):.4f} n={len(d[(r, b)])}" for b in ("base", "c1") if (r, b) in d))
# per-round ratios (adjacent calls): r50 base / none, c1 / base r50
n, rb, rc = d.get(("none", "base"), []), d.get(("r50", "base"), []), d.get(("r50", "c1"), [])
k = min(len(n), len(rb), len(rc))
if k:
    print("per round r50base/none: " + " ".join(f"{rb[i] / n[i]:.3f}" for i in range(k)))
    print("per round c1/base r50:  " + " ".join(f"{rc[i] / rb[i]:.3f}" for i in range(k)))
    print(f"median r50base/none {st.median([rb[i] / n[i] for i in range(k)]):.3f}, c1r50/none {st.median([rc[i] / n[i] for i in range(k)]):.3f}, c1/base {st.median([rc[i] / rb[i] for i in range(k)]):.3f}")
for r in ("topk8", "r10"):
    a, b_ = d.get((r, "base"), []), d.get((r, "c1"), [])
    k = min(len(a), len(b_))
    if k:
        print(f"{r} c1/base per pair: " + " ".join(f"{b_[i] / a[i]:.3f}" for i in range(k)) + f"  median {st.median([b_[i] / a[i] for i in range(k)]):.3f}")
PY
echo "total $(el) s"
