#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
export FRAGMASK_CACHE_DIR=$PWD/.carry-bwd/cache
export PYTHONUNBUFFERED=1
B=$PWD/.carry-bwd/fragmask
nvidia-smi -L
timeout 300 $B attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"
grep -E "FAIL|selftest:" $OUT/selftest.txt | head -40
for spec in "--random 1,16,16,8192,8192,128" "--random 1,16,16,8192,8192,128 --synthetic-mask random:0.5" "--random 1,16,16,16384,16384,128" "--random 1,16,16,8192,8192,128 --deterministic"; do
  echo "== bench backward $spec"
  timeout 90 $B bench backward $spec --warmup 3 --iters 10 2>&1 | tail -3
done > $OUT/bench.txt 2>&1
cat $OUT/bench.txt
