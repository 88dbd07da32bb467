#!/usr/bin/env bash
# Final window, call 2 (x4 host, right after f1 = FA4 part 1): FA4 part 2; final build .carry/final
# against the session's start .carry/s10/fin (41f7677 kernels = 75ecf18).
# GPU0: quick list with FA4, SDPA, Flex. GPU1: whole-table A/B, one round per build.
# GPU2: interleaved A/B (3 pairs) of the rows the session's changes aim at, then forward selftest.
# GPU3: compute-sanitizer on every family, backward selftest, decode sweep, verify, lightning.
set -u
bash .fa4/part2/install-on-device.sh .fa4/part2 2>&1 | tail -1
F=.carry/final; A=.carry/s11/base
for b in $F $A; do xz -dc $b/fragmask.xz > $b/fragmask && chmod +x $b/fragmask; done
source bench/suite/device_env.sh
site=$(fm_install $F)
R=/tmp/f2; mkdir -p $R/san
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
( export CUDA_VISIBLE_DEVICES=0
  BUDGET_S=290 bash bench/suite/device_quick.sh $F > $R/quick.log 2>&1; echo "quick rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  timeout 300 python3 bench/suite/run.py --ab $A $F --rounds 1 --systems fragmask_cli --iters 20 --warmup 5 \
     --budget-s 270 --out $R/ab > $R/ab.txt 2>&1; echo "ab rc=$? " >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=2
  timeout 150 python3 bench/suite/run.py --ab $A $F --interleave --rounds 3 --systems fragmask_cli \
     --only "${ABX:-^(bwd\.(s16384\.(none|causal|docs12)|d64\.s16384\.(none|causal))|fwd\.s16384\.(none|random50|topk8|blocksparse10)|fwd\.wu002\.blocks(10|50))$}" \
     --budget-s 130 --out $R/abx > $R/abx.txt 2>&1; echo "abx rc=$?" >> $R/rc.txt
  timeout 150 $F/fragmask attention --selftest > $R/fwd_selftest.txt 2>&1; echo "fwd selftest rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=3
  OUT=$R/san timeout 170 bash bench/suite/sanitize.sh $F "memcheck racecheck synccheck" > $R/san/log.txt 2>&1; echo "sanitize rc=$?" >> $R/rc.txt
  timeout 70 $F/fragmask attention --backward --selftest > $R/bwd_selftest.txt 2>&1; echo "bwd selftest rc=$?" >> $R/rc.txt
  timeout 30 $F/fragmask decode --sweep > $R/decode_sweep.txt 2>&1; echo "decode sweep rc=$?" >> $R/rc.txt
  timeout 30 $F/fragmask verify > $R/verify.txt 2>&1; echo "verify rc=$?" >> $R/rc.txt
  timeout 20 $F/fragmask lightning --random 2,64,1,96 --steps 200 > $R/lightning.txt 2>&1; echo "lightning rc=$?" >> $R/rc.txt ) &
wait
cp $OUT/suite-*.jsonl $R/ 2>/dev/null
cd /tmp && tar czf $OUT/f2.tgz f2
cat f2/rc.txt
tail -1 f2/fwd_selftest.txt; tail -1 f2/bwd_selftest.txt; tail -1 f2/decode_sweep.txt; tail -2 f2/verify.txt; tail -1 f2/lightning.txt
echo "sanitizer rows: $(wc -l < f2/san/sanitize/summary.txt 2>/dev/null), not clean:"; grep -v "ERROR SUMMARY: 0 errors\|0 hazards displayed" f2/san/sanitize/summary.txt 2>/dev/null | head
tail -4 f2/quick.log | cut -c1-160
grep '^| ' f2/abx.txt | cut -c1-150
grep '^| ' f2/ab.txt | awk -F'|' '$6+0>1.03 || $6+0<0.97 {print $2, $4, $5, $6}' | head -40
