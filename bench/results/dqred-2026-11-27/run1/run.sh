#!/usr/bin/env bash
# dqred: dQ by red.global.add.v2 in the bulk accumulator's register order (no staging).
set -uo pipefail
N=dqred; T0=$(date +%s); LIM=${DQ_LIMIT:-400}
mkdir -p /tmp/$N/new /tmp/$N/base /tmp/$N/r
xz -dc .carry/$N/fragmask.xz > /tmp/$N/new/fragmask && chmod +x /tmp/$N/new/fragmask
xz -dc .carry/base/fragmask.xz > /tmp/$N/base/fragmask && chmod +x /tmp/$N/base/fragmask
NEW=/tmp/$N/new/fragmask; BASE=/tmp/$N/base/fragmask; R=/tmp/$N/r; summ=()
timeout 60 $NEW attention --selftest --backward --cases fragment > $R/selftest.txt 2>&1; rc=$?
summ+=("selftest-fragment rc=$rc $(grep -ciE 'fail' $R/selftest.txt) fail-lines, $(grep -ci pass $R/selftest.txt) pass-lines")
for tool in memcheck racecheck synccheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $NEW attention --random 1,2,2,256,256,128 --backward --causal --dq-reduce fragment-atomics > $R/san-$tool.txt 2>&1; rc=$?
  summ+=("causal d128 $tool rc=$rc $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool.txt | tail -1)")
done
rows=("d128none|1,16,16,16384,16384,128|" "d128causal|1,16,16,16384,16384,128|--causal" "d64causal|1,16,16,16384,16384,64|--causal" "d256none|1,16,16,16384,16384,256|")
for rep in 1 2; do
  for which in B F F3 F3 F B; do
    for r in "${rows[@]}"; do IFS='|' read -r name shp mf <<< "$r"
      [ $(( $(date +%s) - T0 )) -gt $LIM ] && continue
      case $which in B) bin=$BASE; ex="";; F) bin=$NEW; ex="--dq-reduce fragment-atomics";; F3) bin=$NEW; ex="--dq-reduce fragment-atomics --bwd-stages 3"; [ $name = d256none ] && ex="--dq-reduce fragment-atomics --bwd-stages 2";; esac
      out=$(timeout 40 $bin attention --random $shp --backward --bench --json $mf $ex 2>&1 | tail -1)
      echo "$name $which $out" >> $R/ab.txt
    done
  done
done
tar czf $OUT/dqred.tgz -C /tmp/$N r >/dev/null 2>&1
printf '%s\n' "${summ[@]}"
python3 - $R/ab.txt <<'PY'
import sys, json, statistics as st
d = {}
for line in open(sys.argv[1]):
    m, w, rest = line.split(' ', 2)
    try: j = json.loads(rest); d.setdefault((m, w), []).append(j['ms_median'])
    except Exception: print('bad', m, w, rest[:200])
for m in ['d128none', 'd128causal', 'd64causal', 'd256none']:
    b = d.get((m, 'B'), [])
    for w in ['B', 'F', 'F3']:
        v = d.get((m, w), [])
        if v: print(f"{m:10s} {w:3s} n={len(v)} med {st.median(v):.3f} ms ratio {st.median(v)/st.median(b) if b else float('nan'):.3f} {[round(x,3) for x in v]}")
PY
