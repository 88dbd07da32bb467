#!/usr/bin/env bash
# GPU machine, carry .carry/next: backward selftest and sanitizers of each variant, then an
# interleaved A/B of the D=128 backward rows against base, 4 ABBA pairs (about 8 minutes).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export FRAGMASK_CACHE_DIR=/tmp/next-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for v in dkdv lse; do
  fm=.carry/next/$v/fragmask
  timeout 200 $fm attention --selftest --backward > $OUT/selftest-$v.txt 2>&1; echo "$v selftest rc=$? $(tail -1 $OUT/selftest-$v.txt)"
  for t in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 99 $fm attention --random 1,4,2,300,300,128 --causal --backward > /tmp/san.txt 2>&1
    echo "$v $t rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' /tmp/san.txt | tail -1)" | tee -a $OUT/sanitizers.txt
  done
  timeout 240 python3 bench/suite/run.py --ab .carry/next/base .carry/next/$v --interleave --rounds 4 \
    --only '^bwd\.(s16384\.(none|causal|window1024)|s8192\.none|gqa\.s16384\.causal|d64\.s16384\.causal)$' \
    --out $OUT/ab-$v 2>&1 | grep "^|"
done
