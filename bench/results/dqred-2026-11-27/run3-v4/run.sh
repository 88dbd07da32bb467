#!/usr/bin/env bash
# dqv4: fragment-order atomics in quads (red .v4) against pairs (.v2, main).
set -uo pipefail
N=dqv4; T0=$(date +%s); LIM=${DQ_LIMIT:-330}
mkdir -p /tmp/$N/r
xz -dc .carry/$N/fragmask.xz > /tmp/$N/v4 && chmod +x /tmp/$N/v4
xz -dc .carry/$N/v2.xz > /tmp/$N/v2 && chmod +x /tmp/$N/v2
V4=/tmp/$N/v4; V2=/tmp/$N/v2; R=/tmp/$N/r; summ=()
timeout 100 $V4 attention --selftest --backward --cases "d256" > $R/selftest-d256.txt 2>&1; rc=$?
summ+=("selftest d256 rc=$rc: $(tail -1 $R/selftest-d256.txt)")
timeout 60 $V4 attention --selftest --backward --cases "fragment" > $R/selftest-frag.txt 2>&1; rc=$?
summ+=("selftest fragment rc=$rc: $(tail -1 $R/selftest-frag.txt)")
cases=("d256causal|attention --random 1,2,2,256,200,256 --backward --causal" "d128frag|attention --random 1,2,2,256,256,128 --backward --dq-reduce fragment-atomics")
for c in "${cases[@]}"; do IFS='|' read -r name args <<< "$c"
  for tool in memcheck racecheck synccheck; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $V4 $args > $R/san-$name-$tool.txt 2>&1; rc=$?
    summ+=("$name $tool rc=$rc $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$name-$tool.txt | tail -1)")
  done
done
rows=("d256none|1,16,16,16384,16384,256|" "d256causal|1,16,16,16384,16384,256|--causal" "d128none-f|1,16,16,16384,16384,128|--dq-reduce fragment-atomics" "d128causal-f|1,16,16,16384,16384,128|--causal --dq-reduce fragment-atomics" "d128none-bulk|1,16,16,16384,16384,128|")
for rep in 1 2; do
  for which in A B B A; do
    for r in "${rows[@]}"; do IFS='|' read -r name shp mf <<< "$r"
      [ $(( $(date +%s) - T0 )) -gt $LIM ] && continue
      bin=$V2; [ $which = B ] && bin=$V4
      out=$(timeout 40 $bin attention --random $shp --backward --bench --json $mf 2>&1 | tail -1)
      echo "$name $which $out" >> $R/ab.txt
    done
  done
done
tar czf $OUT/dqv4.tgz -C /tmp/$N r >/dev/null 2>&1
printf '%s\n' "${summ[@]}"
python3 - $R/ab.txt <<'PY'
import sys, json, statistics as st
d = {}
for line in open(sys.argv[1]):
    m, w, rest = line.split(' ', 2)
    try: j = json.loads(rest); d.setdefault((m, w), []).append(j['ms_median'])
    except Exception: print('bad', m, w, rest[:200])
for m in sorted({k[0] for k in d}):
    a, b = d.get((m, 'A'), []), d.get((m, 'B'), [])
    if a and b: print(f"{m:14s} v2 {st.median(a):8.3f} v4 {st.median(b):8.3f} v4/v2 {st.median(b)/st.median(a):.3f} n={len(a)},{len(b)} v2 {[round(x,3) for x in a]} v4 {[round(x,3) for x in b]}")
PY
