#!/usr/bin/env bash
# Final call 2 (x4 host, right after f1 = FA4 part 1): FA4 part 2; the final build against base12 (main c647f90).
# GPU0: quick list with FA4, SDPA, Flex. GPU1: whole-table A/B, one round per build.
# GPU2: interleaved A/B (3 pairs) of the rows this session's changes aim at. GPU3: the target rows not in the quick list, with FA4.
set -u
bash .fa4/part2/install-on-device.sh .fa4/part2 2>&1 | tail -1
F=.carry/s12/final; A=.carry/base12
for b in $F $A; do [ -x $b/fragmask ] || { xz -dc $b/fragmask.xz > $b/fragmask && chmod +x $b/fragmask; }; done
source bench/suite/device_env.sh
site=$(fm_install $F)
R=/tmp/f2; mkdir -p $R
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
( export CUDA_VISIBLE_DEVICES=0
  BUDGET_S=290 bash bench/suite/device_quick.sh $F > $R/quick.log 2>&1; echo "quick rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  timeout 310 python3 bench/suite/run.py --ab $A $F --rounds 1 --systems fragmask_cli --iters 20 --warmup 5 \
     --budget-s 280 --out $R/ab > $R/ab.txt 2>&1; echo "ab rc=$? " >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=2
  timeout 300 python3 bench/suite/run.py --ab $A $F --interleave --rounds 3 --systems fragmask_cli \
     --only "${ABX:?}" --budget-s 270 --out $R/abx > $R/abx.txt 2>&1; echo "abx rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=3
  commit=$(cat $F/COMMIT)
  timeout 300 python3 bench/suite/run.py --site $site --bin $F/fragmask --commit $commit --only "${TGT:?}" \
     --budget-s 270 --output $OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-targets.jsonl > $R/targets.txt 2>&1; echo "targets rc=$?" >> $R/rc.txt ) &
wait
cp $OUT/suite-*.jsonl $R/ 2>/dev/null
cd /tmp && tar czf $OUT/f2.tgz f2
cat f2/rc.txt
tail -4 f2/quick.log | cut -c1-160
grep '^| ' f2/abx.txt | cut -c1-150
grep '^| ' f2/ab.txt | awk -F'|' '$6+0>1.03 || $6+0<0.97 {print $2, $4, $5, $6}' | head -40
tail -5 f2/targets.txt | cut -c1-200
