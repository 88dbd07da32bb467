#!/usr/bin/env bash
# Final call 3 (x4 host): context parallelism of the final build at 2 GPUs (GPUs 0,1), then at 4;
# GPU2: decode sweep, then the head-dim-64 backward fix (h/kvr) against the final build: selftest, sanitizers, 3 pairs;
# GPU3: 3 ABBA pairs of the rows the whole-table round read slower (base12 vs final).
set -u
F=.carry/s12/final; K=.carry/s12/kvr; A=.carry/base12
for b in $F $K $A; do [ -x $b/fragmask ] || { xz -dc $b/fragmask.xz > $b/fragmask && chmod +x $b/fragmask; }; done
source bench/suite/device_env.sh
site=$(fm_install $F)
R=/tmp/f3; mkdir -p $R/san
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
( export CUDA_VISIBLE_DEVICES=0,1
  PYTHONPATH=$site timeout 100 torchrun --nproc-per-node 2 --master-port 29521 crates/python/tests/test_distributed_gpu.py > $R/cp_tests.txt 2>&1; echo "cp tests rc=$?" >> $R/rc.txt
  PYTHONPATH=$site timeout 170 torchrun --nproc-per-node 2 --master-port 29522 bench/cp_bench.py --lean --json $R/cp2.json > $R/cp2.txt 2>&1; echo "cp2 rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=2
  timeout 100 $F/fragmask decode --sweep > $R/decode_sweep.txt 2>&1; echo "decode sweep rc=$?" >> $R/rc.txt
  timeout 60 $K/fragmask attention --backward --selftest > $R/kvr_bwd_selftest.txt 2>&1; echo "kvr bwd selftest rc=$?" >> $R/rc.txt
  for t in memcheck racecheck synccheck; do
    timeout 40 compute-sanitizer --tool $t --error-exitcode 99 $K/fragmask attention --random 1,2,2,450,500,64 --backward --window 100,40 --diag-offset 30 > $R/san/kvr-w64-$t.txt 2>&1
    echo "kvr window d64 $t rc=$? $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san/kvr-w64-$t.txt | tail -1)" >> $R/san/summary.txt
    timeout 40 compute-sanitizer --tool $t --error-exitcode 99 $K/fragmask attention --random 1,4,2,512,512,64 --backward --causal > $R/san/kvr-c64-$t.txt 2>&1
    echo "kvr causal gqa d64 $t rc=$? $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san/kvr-c64-$t.txt | tail -1)" >> $R/san/summary.txt
  done
  timeout 150 python3 bench/suite/run.py --ab $F $K --interleave --rounds 3 --systems fragmask_cli \
     --only '^bwd\.(d64\.s16384\.(none|causal)|s16384\.none)$' --budget-s 130 --out $R/abk > $R/abk.txt 2>&1; echo "abk rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=3
  timeout 250 python3 bench/suite/run.py --ab $A $F --interleave --rounds 3 --systems fragmask_cli \
     --only '^(bwd\.(s16384\.(random50|causal)|s8192\.random50|d64\.s16384\.(none|causal))|fwd\.(wu002\.blocks50|d256\.s16384\.causal))$' --budget-s 230 --out $R/abr > $R/abr.txt 2>&1; echo "abr rc=$?" >> $R/rc.txt ) &
wait
PYTHONPATH=$site timeout 150 torchrun --nproc-per-node 4 --master-port 29523 bench/cp_bench.py --lean --only document,causal --json $R/cp4.json > $R/cp4.txt 2>&1; echo "cp4 rc=$?" >> $R/rc.txt
cd /tmp && tar czf $OUT/f3.tgz f3
cat f3/rc.txt
tail -1 f3/decode_sweep.txt; grep -c PASS f3/decode_sweep.txt; tail -1 f3/kvr_bwd_selftest.txt; cat f3/san/summary.txt
grep -E "^(Ran|OK|FAILED)" f3/cp_tests.txt
grep '^| ' f3/abk.txt | cut -c1-150; grep '^| ' f3/abr.txt | cut -c1-150
grep -E "^SUMMARY" f3/cp2.txt | grep -v previous | cut -c1-330; sed -n '/^targets/,$p' f3/cp2.txt
grep -E "^SUMMARY" f3/cp4.txt | grep -v previous | cut -c1-330
