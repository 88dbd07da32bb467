#!/bin/bash
# Device call 5: the dQ postprocess staged through shared memory (whole-sector stores).
# New binary .carry/fragmask_pp vs merged main .carry/fragmask: backward sweep and sanitizers on the
# new one, then an interleaved A/B of `bench backward` on the same inputs and masks (docs12, none,
# random50 at 8192; none at 16384), and Nsight Compute of the postprocess kernel in both.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
A=$PWD/.carry/fragmask; B=$PWD/.carry/fragmask_pp
timeout 150 $B attention --selftest --backward > $OUT/selftest_pp.txt 2>&1
echo "bwd selftest (new) rc=$? $(grep -c ^PASS $OUT/selftest_pp.txt) pass $(grep -c ^FAIL $OUT/selftest_pp.txt) fail t=$SECONDS"
for v in "--random 1,2,2,300,260,128 --synthetic-mask random:0.5" "--random 1,2,1,192,160,256 --window 40,20 --deterministic" "--random 1,2,2,200,200,64 --synthetic-mask random:0.5 --block 64x64"; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B attention --backward $v 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
    echo "$tool | $v | $r"
  done
done | tee $OUT/sanitizers_pp.txt; echo "t=$SECONDS"
# Inputs and masks from the torch side (it also times Flex and the new binary).
timeout 200 python3 bench/backward_bench.py --bin "$B" --out "$OUT" --workdir /tmp/fm_bwd --iters 20 --sizes 8192 --only none,random50,docs12 > $OUT/torch_side_pp.txt 2>&1
echo "torch side rc=$? t=$SECONDS"; tail -9 $OUT/torch_side_pp.txt
W=/tmp/fm_bwd
for tag in docs12_8192 none_8192 random50_8192; do
  m=""; [ -f $W/mask_$tag.safetensors ] && m="--mask $W/mask_$tag.safetensors"
  for round in 1 2; do
    for bin in $A $B; do
      r=$(timeout 60 $bin bench backward --inputs $W/inputs_$tag.safetensors --d-o $W/inputs_$tag.safetensors $m --json --warmup 10 --iters 30 2>&1 | tail -1 | python3 -c "import json,sys; print(round(json.loads(sys.stdin.read())['ms_median'],4))" 2>&1)
      echo "$tag round $round $(basename $bin) $r"
    done
  done
done | tee $OUT/ab.txt
for bin in $A $B; do
  timeout 60 ncu --clock-control none -k regex:post --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --launch-count 2 \
    $bin bench backward --inputs $W/inputs_docs12_8192.safetensors --d-o $W/inputs_docs12_8192.safetensors --mask $W/mask_docs12_8192.safetensors --warmup 0 --iters 1 2>&1 | grep -E "fm_|duration|throughput" | head -6 | sed "s#^#$(basename $bin): #"
done | tee $OUT/ncu_post.txt
