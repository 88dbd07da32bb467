#!/bin/bash
# NEEDS 2 GPUs (torchrun --nproc-per-node 2); about 3 min wall at most (timeouts below).
# fragmask.distributed (helper cpx), run 2: GPU tests, then cp_bench (all four cases)
# with main's distributed sources (base) and this branch's (cpx), same wheel, same
# run; the cpx run also alternates base and cpx in one process (--ab) and traces.
set -u
C=.carry/cpx
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out_cpx}; mkdir -p $OUT
nvidia-smi --query-gpu=name --format=csv,noheader | head -2
for v in base cpx; do
  rm -rf /tmp/fm_$v
  python3 -m pip install -q --no-index --no-deps --target /tmp/fm_$v $C/fragmask-*.whl
  rm -rf /tmp/fm_$v/fragmask/distributed
  cp -r $C/py_$v /tmp/fm_$v/fragmask/distributed
done
cp -r $C/py_base /tmp/fm_cpx/fragmask/distributed_base
T0=$(date +%s)
PYTHONPATH=/tmp/fm_cpx timeout 100 torchrun --nproc-per-node 2 --master-port 29511 \
  $C/test_distributed_gpu.py -v > $OUT/tests.txt 2>&1
echo "tests rc=$? ($(( $(date +%s) - T0 )) s)"; grep -E "^(Ran |OK|FAILED)|\.\.\. (ok|FAIL|ERROR)|Error" $OUT/tests.txt | sort | uniq | head -20
T0=$(date +%s)
PYTHONPATH=/tmp/fm_base timeout 75 torchrun --nproc-per-node 2 --master-port 29512 \
  $C/cp_bench.py --lean --json $OUT/base.json > $OUT/base.txt 2>&1
echo "base bench rc=$? ($(( $(date +%s) - T0 )) s)"
T0=$(date +%s)
PYTHONPATH=/tmp/fm_cpx timeout 110 torchrun --nproc-per-node 2 --master-port 29513 \
  $C/cp_bench.py --lean --ab fragmask.distributed_base --trace $OUT --json $OUT/cpx.json \
  > $OUT/cpx.txt 2>&1
echo "cpx bench rc=$? ($(( $(date +%s) - T0 )) s)"
for v in base cpx; do
  echo "== $v"
  grep -E "^SUMMARY|FAILED" $OUT/$v.txt | grep -v "SUMMARY.*, [a-z ]*:" | cut -c1-330
  grep -E "^SUMMARY.*(previous planner|torch merge)" $OUT/$v.txt | cut -c1-160
  sed -n '/^targets/,$p' $OUT/$v.txt
done
echo "== alternating in one process (cpx run)"
grep -E "^AB" $OUT/cpx.txt
