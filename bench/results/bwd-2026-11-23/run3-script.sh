#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
export FRAGMASK_CACHE_DIR=$PWD/.carry-bwd/cache
export PYTHONUNBUFFERED=1
B=$PWD/.carry-bwd/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"
grep -E "FAIL|selftest:" $OUT/selftest.txt | head -20
# Sanitizers on small shapes of each variant (backward kernels only).
{
for v in "--random 1,2,1,200,150,128 --causal --diag-offset -50" \
         "--random 1,2,2,300,260,128 --synthetic-mask random:0.5" \
         "--random 1,2,2,200,200,128 --synthetic-mask random:0.5 --block 64x64" \
         "--random 1,2,1,192,160,256 --window 40,20" \
         "--random 1,2,2,300,260,64 --synthetic-mask random:0.5 --deterministic" \
         "--random 1,2,2,200,200,128 --causal --dq-atomics --deterministic"; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B attention --backward $v 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rror" | tail -2 | tr '\n' ' ')
    echo "$tool rc=${PIPESTATUS[0]} | $v | $r"
  done
done
} > $OUT/sanitizers.txt 2>&1
cat $OUT/sanitizers.txt
{
for spec in "--random 1,16,16,8192,8192,128" "--random 1,16,16,8192,8192,128 --synthetic-mask random:0.5" "--random 1,16,16,16384,16384,128" "--random 1,16,16,16384,16384,128 --synthetic-mask random:0.5" "--random 1,16,16,8192,8192,128 --causal"; do
  for mode in "" "--bwd-stages 3" "--deterministic"; do
    echo "== bench backward $spec $mode"
    timeout 90 $B bench backward $spec $mode --warmup 5 --iters 20 2>&1 | tail -1
  done
done
} > $OUT/bench.txt 2>&1
cat $OUT/bench.txt
cd .carry-bwd && timeout 330 python3 backward_bench.py --bin $B --out $OUT --workdir /tmp/fm_bwd --iters 20 > $OUT/torch_side.txt 2>&1; echo "backward_bench rc=$?"
tail -25 $OUT/torch_side.txt
