#!/bin/bash
# Final device call A (merged main, after bwd + bwdaux + decode): backward sweep, sanitizers on the
# last backward build (6acce58: every consumer thread frees the lse/Dsum stage), the torch side
# (SDPA / Flex / fragmask backward, video10 included), large-shape check against fp32 autograd.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
B=$PWD/.carry/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $OUT/gpu.txt
timeout 150 $B attention --selftest --backward > $OUT/bwd_selftest.txt 2>&1
echo "bwd selftest rc=$? $(grep -c ^PASS $OUT/bwd_selftest.txt) pass $(grep -c ^FAIL $OUT/bwd_selftest.txt) fail t=$SECONDS"; grep -E "^FAIL|selftest:" $OUT/bwd_selftest.txt | head -5
{
for v in "--random 1,2,1,200,150,128 --causal --diag-offset -50" \
         "--random 1,2,2,300,260,128 --synthetic-mask random:0.5" \
         "--random 1,2,2,200,200,128 --synthetic-mask random:0.5 --block 64x64" \
         "--random 1,2,1,192,160,256 --window 40,20 --deterministic" \
         "--random 1,2,2,200,200,128 --causal --dq-atomics"; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$B" attention --backward $v 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
    echo "$tool | $v | $r"
  done
done
} > $OUT/bwd_sanitizers.txt 2>&1
cat $OUT/bwd_sanitizers.txt; echo "t=$SECONDS"
timeout 330 python3 bench/backward_bench.py --bin "$B" --out "$OUT" --workdir /tmp/fm_bwd --iters 20 \
    > $OUT/bwd_torch_side.txt 2>&1; echo "backward_bench rc=$? t=$SECONDS"
W=/tmp/fm_bwd
if [ -f $W/inputs_none_8192.safetensors ] && [ $SECONDS -lt 500 ]; then
  timeout 60 $B attention --backward --inputs $W/inputs_none_8192.safetensors --out $W/grads_none_8192.safetensors > $OUT/bwd_check_none_8192.txt 2>&1
  timeout 90 python3 bench/backward_bench.py --check $W/grads_none_8192.safetensors --inputs $W/inputs_none_8192.safetensors >> $OUT/bwd_check_none_8192.txt 2>&1
  echo "check none_8192 rc=$? t=$SECONDS"; tail -5 $OUT/bwd_check_none_8192.txt
fi
tail -22 $OUT/bwd_torch_side.txt
