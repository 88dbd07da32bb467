#!/usr/bin/env bash
# Final window, call 3 (x4 host): Python GPU tests and the overhead table of the final wheel (GPU0, GPU3),
# context parallelism at 2 GPUs (GPUs 1,2), then at 4 GPUs (all four).
set -u
F=.carry/final
source bench/suite/device_env.sh
site=$(fm_install $F)
[ -x $F/fragmask ] || { xz -dc $F/fragmask.xz > $F/fragmask && chmod +x $F/fragmask; }
R=/tmp/f3; mkdir -p $R
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
( export CUDA_VISIBLE_DEVICES=0
  cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$OLDPWD/$F/fragmask timeout 120 python3 -m unittest test_gpu test_torch > $R/py_tests.txt 2>&1; echo "py tests rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=3
  PYTHONPATH=$site timeout 170 python3 bench/python_overhead.py --json $R/overhead.json > $R/overhead.txt 2>&1; echo "overhead rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1,2
  PYTHONPATH=$site timeout 100 torchrun --nproc-per-node 2 --master-port 29521 crates/python/tests/test_distributed_gpu.py > $R/cp_tests.txt 2>&1; echo "cp tests rc=$?" >> $R/rc.txt
  PYTHONPATH=$site timeout 150 torchrun --nproc-per-node 2 --master-port 29522 bench/cp_bench.py --lean --json $R/cp2.json > $R/cp2.txt 2>&1; echo "cp2 rc=$?" >> $R/rc.txt ) &
wait
PYTHONPATH=$site timeout 170 torchrun --nproc-per-node 4 --master-port 29523 bench/cp_bench.py --lean --only document,causal --json $R/cp4.json > $R/cp4.txt 2>&1; echo "cp4 rc=$?" >> $R/rc.txt
cd /tmp && tar czf $OUT/f3.tgz f3
cat f3/rc.txt
grep -E "^(Ran|OK|FAILED)" f3/py_tests.txt; grep -E "^(Ran|OK|FAILED)" f3/cp_tests.txt
sed -n '/^Targets/,$p' f3/overhead.txt | head -24
grep -E "^SUMMARY" f3/cp2.txt | grep -v previous | cut -c1-330; sed -n '/^targets/,$p' f3/cp2.txt
grep -E "^SUMMARY" f3/cp4.txt | grep -v previous | cut -c1-330
