#!/usr/bin/env bash
# dqred2: the new default at head dim 256 (pair mode, dQ by fragment-order atomics, 2 stages).
set -uo pipefail
N=dqred; T0=$(date +%s); LIM=${DQ_LIMIT:-400}
mkdir -p /tmp/$N/new /tmp/$N/base /tmp/$N/r2
xz -dc .carry/$N/fragmask.xz > /tmp/$N/new/fragmask && chmod +x /tmp/$N/new/fragmask
xz -dc .carry/base/fragmask.xz > /tmp/$N/base/fragmask && chmod +x /tmp/$N/base/fragmask
NEW=/tmp/$N/new/fragmask; BASE=/tmp/$N/base/fragmask; R=/tmp/$N/r2; summ=()
timeout 150 $NEW attention --selftest --backward > $R/selftest.txt 2>&1; rc=$?
summ+=("selftest-bwd-all rc=$rc: $(tail -1 $R/selftest.txt); FAIL lines $(grep -c '^FAIL' $R/selftest.txt)")
ids=$R/doc_ids.npy
python3 -c "import numpy as np; np.save('$ids', np.repeat(np.arange(5, dtype=np.int32), [90, 130, 40, 200, 52]))"
$NEW pack --predicate "causal,doc=$ids" --seqlen-q 512 --seqlen-k 512 --transposed -o $R/docs.safetensors -q
cases=("causal|attention --random 1,2,2,256,256,256 --backward --causal|memcheck racecheck synccheck"
 "det-causal|attention --random 1,2,2,256,256,256 --backward --causal --deterministic|memcheck racecheck synccheck"
 "docs|attention --random 1,2,2,512,512,256 --backward --mask $R/docs.safetensors|memcheck racecheck synccheck"
 "gqa-none|attention --random 1,4,2,256,200,256 --backward|memcheck synccheck"
 "rand50|attention --random 1,2,2,256,256,256 --backward --synthetic-mask random:0.5|memcheck racecheck"
 "d64f3|attention --random 1,2,2,256,256,64 --backward --causal --dq-reduce fragment-atomics --bwd-stages 3|memcheck racecheck synccheck")
for c in "${cases[@]}"; do IFS='|' read -r name args tools <<< "$c"
  for tool in $tools; do
    [ $(( $(date +%s) - T0 )) -gt 260 ] && { summ+=("$name $tool skipped (time)"); continue; }
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $NEW $args > $R/san-$name-$tool.txt 2>&1; rc=$?
    summ+=("$name $tool rc=$rc $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$name-$tool.txt | tail -1)")
  done
done
# docs12 at S=16384 for the A/B
python3 - $R/docs12.npy <<'PY'
import sys, numpy as np
rng = np.random.default_rng(12); cuts = np.sort(rng.choice(np.arange(1, 16384), 11, replace=False))
lens = np.diff(np.concatenate([[0], cuts, [16384]])); np.save(sys.argv[1], np.repeat(np.arange(12, dtype=np.int32), lens))
PY
$NEW pack --predicate "causal,doc=$R/docs12.npy" --seqlen-q 16384 --seqlen-k 16384 --transposed -o $R/docs12.safetensors -q
rows=("d256none|1,16,16,16384,16384,256|" "d256causal|1,16,16,16384,16384,256|--causal" "d256gqa|1,32,8,16384,16384,256|--causal" "d256docs12|1,16,16,16384,16384,256|--mask $R/docs12.safetensors" "d256rand50|1,16,16,16384,16384,256|--synthetic-mask random:0.5" "d64none|1,16,16,16384,16384,64|" "d64causal|1,16,16,16384,16384,64|--causal")
for rep in 1 2; do
  for which in B N N B; do
    for r in "${rows[@]}"; do IFS='|' read -r name shp mf <<< "$r"
      [ $(( $(date +%s) - T0 )) -gt $LIM ] && continue
      ex=""; [ $which = N ] && [[ $name == d64* ]] && ex="--dq-reduce fragment-atomics --bwd-stages 3"
      bin=$BASE; [ $which = N ] && bin=$NEW
      out=$(timeout 40 $bin attention --random $shp --backward --bench --json $mf $ex 2>&1 | tail -1)
      echo "$name $which $out" >> $R/ab.txt
    done
  done
done
rm -f $R/*.npy $R/*.safetensors; tar czf $OUT/dqred2.tgz -C /tmp/$N r2 >/dev/null 2>&1
printf '%s\n' "${summ[@]}"
python3 - $R/ab.txt <<'PY'
import sys, json, statistics as st
d = {}
for line in open(sys.argv[1]):
    m, w, rest = line.split(' ', 2)
    try: j = json.loads(rest); d.setdefault((m, w), []).append(j['ms_median'])
    except Exception: print('bad', m, w, rest[:200])
for m in sorted({k[0] for k in d}):
    b, n = d.get((m, 'B'), []), d.get((m, 'N'), [])
    if b and n: print(f"{m:11s} base {st.median(b):8.3f} new {st.median(n):8.3f} ratio {st.median(n)/st.median(b):.3f} n={len(b)},{len(n)} {[round(x,3) for x in n]}")
PY
