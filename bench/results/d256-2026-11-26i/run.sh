#!/usr/bin/env bash
# d256: pair-mode head-dim-256 backward. Selftest, sanitizers, interleaved A/B vs base.
set -uo pipefail
N=d256; T0=$(date +%s)
mkdir -p /tmp/$N/new /tmp/$N/base /tmp/$N/r
xz -dc .carry/$N/fragmask.xz > /tmp/$N/new/fragmask && chmod +x /tmp/$N/new/fragmask && cp .carry/$N/COMMIT /tmp/$N/new/
xz -dc .carry/base/fragmask.xz > /tmp/$N/base/fragmask && chmod +x /tmp/$N/base/fragmask && cp .carry/base/COMMIT /tmp/$N/base/
NEW=/tmp/$N/new/fragmask; BASE=/tmp/$N/base/fragmask
R=/tmp/$N/r; summ=()
# 1. selftest backward (all cases; D=256 ones included)
timeout 75 $NEW attention --selftest --backward --cases d256 > $R/selftest.txt 2>&1; rc=$?
summ+=("selftest-bwd rc=$rc $(grep -ciE 'fail' $R/selftest.txt) fail-lines $(grep -ci pass $R/selftest.txt) pass-lines")
# 2. sanitizers on small D=256 backward calls
ids=$R/doc_ids.npy
python3 -c "import numpy as np; np.save('$ids', np.repeat(np.arange(5, dtype=np.int32), [90, 130, 40, 200, 52]))"
$NEW pack --predicate "causal,doc=$ids" --seqlen-q 512 --seqlen-k 512 --transposed -o $R/docs.safetensors -q
cases=("causal|attention --random 1,2,2,256,256,256 --backward --causal"
 "gqa-none|attention --random 1,4,2,256,200,256 --backward"
 "det-causal|attention --random 1,2,2,256,256,256 --backward --causal --deterministic"
 "docs|attention --random 1,2,2,512,512,256 --backward --mask $R/docs.safetensors"
 "rand50|attention --random 1,2,2,256,256,256 --backward --synthetic-mask random:0.5")
for c in "${cases[@]}"; do name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    [ $(( $(date +%s) - T0 )) -gt 115 ] && { summ+=("$name $tool skipped (time)"); continue; }
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $NEW $args > $R/san-$name-$tool.txt 2>&1; rc=$?
    s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$name-$tool.txt | tail -1)
    summ+=("$name $tool rc=$rc ${s:-none}")
  done
done
# 3. interleaved ABBA: kernel times of base vs new (default), and new with --dq-atomics --bwd-stages 2
ab=()
for rep in 1 2; do
  for which in B N N2 N2 N B; do
    for m in none causal; do
      mf=""; [ $m = causal ] && mf="--causal"
      a="attention --random 1,16,16,16384,16384,256 --backward --bench --json $mf"
      [ $(( $(date +%s) - T0 )) -gt 220 ] && continue
      case $which in B) bin=$BASE; ex="";; N) bin=$NEW; ex="";; N2) bin=$NEW; ex="--dq-atomics --bwd-stages 2";; esac
      out=$(timeout 30 $bin $a $ex 2>&1 | tail -1)
      echo "$m $which $out" >> $R/ab.txt
    done
  done
done
rm -f $R/*.npy $R/docs.safetensors; tar czf $OUT/d256.tgz -C /tmp/$N r >/dev/null 2>&1
printf '%s\n' "${summ[@]}"
python3 - $R/ab.txt <<'PY'
import sys, json, statistics as st
d = {}
for line in open(sys.argv[1]):
    m, w, rest = line.split(' ', 2)
    try: j = json.loads(rest); d.setdefault((m, w), []).append(j['ms_median']); lab = j['kernel']
    except Exception: print('bad', m, w, rest[:150])
for m in ['none', 'causal']:
    b = d.get((m, 'B'), [])
    for w in ['B', 'N', 'N2']:
        v = d.get((m, w), [])
        if v: print(f"{m:7s} {w:3s} n={len(v)} median {st.median(v):.3f} ms  ratio/base {st.median(v)/st.median(b) if b else float('nan'):.3f}  all {[round(x,3) for x in v]}")
PY
