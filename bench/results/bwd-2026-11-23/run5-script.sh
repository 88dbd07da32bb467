#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
export FRAGMASK_CACHE_DIR=$PWD/.carry-bwd/cache
export PYTHONUNBUFFERED=1
B=$PWD/.carry-bwd/fragmask
timeout 120 $B attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"
grep -E "FAIL|selftest:" $OUT/selftest.txt | head -20
{
for v in "--random 1,2,2,300,260,128 --synthetic-mask random:0.5" "--random 1,2,1,192,160,256 --window 40,20 --deterministic" "--random 1,2,2,200,200,128 --synthetic-mask random:0.5 --block 64x64"; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B attention --backward $v 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rror" | tail -3 | tr '\n' ' ')
    echo "$tool | $v | $r"
  done
done
} > $OUT/sanitizers.txt 2>&1
cut -c1-200 $OUT/sanitizers.txt
cd .carry-bwd && timeout 150 python3 backward_bench.py --bin $B --out $OUT --workdir /tmp/fm_bwd --iters 20 --only none,random50,docs12,topk > $OUT/torch_side.txt 2>&1; echo "backward_bench rc=$?"
tail -16 $OUT/torch_side.txt
