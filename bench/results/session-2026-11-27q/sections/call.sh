#!/usr/bin/env bash
# GPU machine, carry .carry/s17b (a420d46's kernels: the grid's launch order) and .carry/s17d (the backward's
# causal window walk in launch-order sections of planes). Selftest and sanitizers of s17d, then an interleaved A/B.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export FRAGMASK_CACHE_DIR=/tmp/s17d-cache
fm=.carry/s17d/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
timeout 200 $fm attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? $(tail -1 $OUT/selftest.txt)"
grep "sections" $OUT/selftest.txt
# causal S=1024 at H=64 takes sections of 32 planes by default (512 key tiles over 132 SMs)
for t in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $t --error-exitcode 99 $fm attention --random 1,64,64,1024,1024,128 --causal --backward > /tmp/san.txt 2>&1
  echo "$t rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' /tmp/san.txt | tail -1)" | tee -a $OUT/sanitizers.txt
done
timeout 330 python3 bench/suite/run.py --ab .carry/s17b .carry/s17d --interleave --rounds 3 \
  --only '^bwd\.(s4096\.causal|s8192\.causal|s16384\.causal|s16384\.none|gqa\.s16384\.causal)$' --out $OUT/ab 2>&1 | grep "^|"
