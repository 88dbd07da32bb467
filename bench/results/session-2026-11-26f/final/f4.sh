#!/usr/bin/env bash
# Call 4 (x4): h/kvl (K/V on their own barrier with tile lists) against base12 and against h/kvr (= main's kernels).
set -u
K=.carry/s12/kvl; V=.carry/s12/kvr; A=.carry/base12
for b in $K $V $A; do [ -x $b/fragmask ] || { xz -dc $b/fragmask.xz > $b/fragmask && chmod +x $b/fragmask; }; done
source bench/suite/device_env.sh
R=/tmp/f4; mkdir -p $R/san
nvidia-smi --query-gpu=index,name --format=csv,noheader | head -1
( export CUDA_VISIBLE_DEVICES=0
  timeout 200 python3 bench/suite/run.py --ab $A $K --interleave --rounds 3 --systems fragmask_cli \
     --only '^bwd\.(s8192\.random50|s16384\.(random50|topk8)|s4096\.random50)$' --budget-s 180 --out $R/ab0 > $R/ab0.txt 2>&1; echo "ab0 rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  timeout 200 python3 bench/suite/run.py --ab $A $K --interleave --rounds 3 --systems fragmask_cli \
     --only '^bwd\.(s16384\.(none|causal|window1024|docs12)|d64\.s16384\.(none|causal)|s8192\.(none|docs12)|wu002\.blocks10)$' --budget-s 180 --out $R/ab1 > $R/ab1.txt 2>&1; echo "ab1 rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=2
  timeout 80 $K/fragmask attention --backward --selftest > $R/bwd_selftest.txt 2>&1; echo "kvl bwd selftest rc=$?" >> $R/rc.txt
  for c in "rand|attention --random 1,2,2,512,512,128 --backward --synthetic-mask random:0.5" "gqa-blocks|attention --random 1,4,2,512,512,128 --backward --synthetic-mask blocksparse:0.3:0.5" "w128|attention --random 1,2,2,1100,1100,128 --backward --window 300,0"; do
    n=${c%%|*}; a=${c#*|}
    for t in memcheck racecheck synccheck; do
      timeout 40 compute-sanitizer --tool $t --error-exitcode 99 $K/fragmask $a > $R/san/$n-$t.txt 2>&1
      echo "$n $t rc=$? $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san/$n-$t.txt | tail -1)" >> $R/san/summary.txt
    done; done ) &
( export CUDA_VISIBLE_DEVICES=3
  timeout 200 python3 bench/suite/run.py --ab $V $K --interleave --rounds 3 --systems fragmask_cli \
     --only '^bwd\.(s8192\.random50|s16384\.random50|s16384\.none|wu002\.blocks10)$' --budget-s 180 --out $R/ab3 > $R/ab3.txt 2>&1; echo "ab3 rc=$?" >> $R/rc.txt ) &
wait
cd /tmp && tar czf $OUT/f4.tgz f4
cat f4/rc.txt; tail -1 f4/bwd_selftest.txt; cat f4/san/summary.txt
for f in ab0 ab1 ab3; do grep '^| ' f4/$f.txt | cut -c1-150; done
