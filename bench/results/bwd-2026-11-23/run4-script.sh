#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
export FRAGMASK_CACHE_DIR=$PWD/.carry-bwd/cache
export PYTHONUNBUFFERED=1
B=$PWD/.carry-bwd/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 $B attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"
grep -E "FAIL|selftest:" $OUT/selftest.txt | head -20
{
for v in "--random 1,2,1,200,150,128 --causal --diag-offset -50" \
         "--random 1,2,2,300,260,128 --synthetic-mask random:0.5" \
         "--random 1,2,2,200,200,128 --synthetic-mask random:0.5 --block 64x64" \
         "--random 1,2,1,192,160,256 --window 40,20" \
         "--random 1,2,2,300,260,64 --synthetic-mask random:0.5 --deterministic" \
         "--random 1,2,2,200,200,128 --causal --dq-atomics --deterministic"; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B attention --backward $v 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rror" | tail -3 | tr '\n' ' ')
    echo "$tool | $v | $r"
  done
done
} > $OUT/sanitizers.txt 2>&1
cat $OUT/sanitizers.txt | cut -c1-220
{
for spec in "--random 1,16,16,8192,8192,128" "--random 1,16,16,8192,8192,128 --synthetic-mask random:0.5" "--random 1,16,16,16384,16384,128" "--random 1,16,16,16384,16384,128 --synthetic-mask random:0.5" \
            "--random 1,16,16,8192,8192,64" "--random 1,16,16,8192,8192,256" "--random 1,16,16,8192,8192,128 --synthetic-mask random:0.5 --block 64x64"; do
  for mode in "" "--deterministic"; do
    echo "== bench backward $spec $mode"
    timeout 90 $B bench backward $spec $mode --warmup 5 --iters 20 2>&1 | tail -1
  done
done
} > $OUT/bench.txt 2>&1
cat $OUT/bench.txt
cd .carry-bwd && timeout 360 python3 backward_bench.py --bin $B --out $OUT --workdir /tmp/fm_bwd --iters 20 > $OUT/torch_side.txt 2>&1; echo "backward_bench rc=$?"
tail -22 $OUT/torch_side.txt
cd ..
for w in docs12_8192 none_8192; do
  m=""; [ -f /tmp/fm_bwd/mask_$w.safetensors ] && m="--mask /tmp/fm_bwd/mask_$w.safetensors"
  timeout 120 ncu --clock-control none --kernel-name regex:fragmask_attention_bwd --launch-count 3 --metrics gpu__time_duration.sum \
    $B bench backward --inputs /tmp/fm_bwd/inputs_$w.safetensors $m --warmup 0 --iters 1 > $OUT/ncu_$w.txt 2>&1
  echo "ncu $w rc=$?"; grep -E "fragmask_attention_bwd|gpu__time_duration" $OUT/ncu_$w.txt | head -8
done
