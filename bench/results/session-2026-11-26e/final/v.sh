#!/usr/bin/env bash
# Final verification (1 GPU) of the final build .carry/s11/v (the merged documents-grid backward and the
# head-dim-64-only lse pairs) against .carry/final (8e5afc9): backward selftest, sanitizers on
# documents/D=64/D=128 backward cases, forward documents selftest cases, Python GPU tests, interleaved A/B
# of every backward row (2 ABBA pairs) and the forward documents rows.
set -u
source bench/suite/device_env.sh
V=.carry/s11/v; F=.carry/final
for b in $V $F; do [ -x $b/fragmask ] || { xz -dc $b/fragmask.xz > $b/fragmask && chmod +x $b/fragmask; }; done
site=$(fm_install $V)
R=/tmp/v; mkdir -p $R/san; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/device.txt
timeout 100 $V/fragmask attention --backward --selftest > $R/bwd_selftest.txt 2>&1; echo "bwd selftest rc=$? t=$(( $(date +%s) - t0 ))" >> $R/rc.txt
python3 -c "import numpy as np; np.save('$R/ids.npy', np.repeat(np.arange(6, dtype=np.int32), [100, 1, 157, 126, 128, 488])); np.save('$R/ids2.npy', np.repeat(np.arange(5, dtype=np.int32), [33, 1, 219, 3, 468]))"
$V/fragmask pack --predicate "causal,doc=$R/ids.npy" --seqlen-q 1000 --seqlen-k 1000 --transposed -o $R/dc.safetensors -q; echo "pack dc rc=$?" >> $R/rc.txt
$V/fragmask pack --predicate "doc=$R/ids2.npy" --seqlen-q 724 --seqlen-k 724 --transposed -o $R/df.safetensors -q; echo "pack df rc=$?" >> $R/rc.txt
cases=("docs-causal-d128|attention --random 1,2,2,1000,1000,128 --backward --mask $R/dc.safetensors"
       "docs-full-gqa-d64|attention --random 1,4,2,724,724,64 --backward --mask $R/df.safetensors"
       "none-d128|attention --random 1,2,2,512,512,128 --backward"
       "causal-d64|attention --random 1,2,2,300,300,64 --backward --causal")
for c in "${cases[@]}"; do n=${c%%|*}; a=${c#*|}
  for t in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 99 $V/fragmask $a > $R/san/$n-$t.txt 2>&1
    echo "$n $t rc=$? $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san/$n-$t.txt | tail -1)" >> $R/san/summary.txt
  done; done
echo "sanitize t=$(( $(date +%s) - t0 ))" >> $R/rc.txt
( cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$OLDPWD/$V/fragmask timeout 90 python3 -m unittest test_gpu test_torch > $R/py_tests.txt 2>&1; echo "py tests rc=$?" >> $R/rc.txt )
timeout 230 python3 bench/suite/run.py --ab $F $V --interleave --rounds 2 --systems fragmask_cli \
   --only '^(bwd\..*|fwd\.s(4096|8192|16384)\.docs12)$' --budget-s 210 --out $R/ab > $R/ab.txt 2>&1; echo "ab rc=$? t=$(( $(date +%s) - t0 ))" >> $R/rc.txt
cd /tmp && tar czf $OUT/v.tgz v
cat v/rc.txt; tail -1 v/bwd_selftest.txt; grep -c "^PASS.*documents grid" v/bwd_selftest.txt; cat v/san/summary.txt
grep -E "^(Ran|OK|FAILED)" v/py_tests.txt
grep '^| ' v/ab.txt | cut -c1-150
