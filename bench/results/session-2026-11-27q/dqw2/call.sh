#!/usr/bin/env bash
# GPU machine, carry .carry/s17a (f7b0ec2: the writer warp at one chunk per warpgroup) and .carry/s17b
# (the writer warp serving two chunks of one warpgroup: the 64-token tile at head dim 128).
# Backward selftest and sanitizers of s17b, then an interleaved A/B, 4 ABBA pairs.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export FRAGMASK_CACHE_DIR=/tmp/s17b-cache
fm=.carry/s17b/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
timeout 200 $fm attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? $(tail -1 $OUT/selftest.txt)"
for c in "--random 1,2,2,256,320,128 --block 64x64 --synthetic-mask random:0.5" "--random 1,4,2,300,200,128 --block 64x64 --synthetic-mask random:0.3"; do
  for t in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 99 $fm attention $c --backward > /tmp/san.txt 2>&1
    echo "$t rc=$? [$c] $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' /tmp/san.txt | tail -1)" | tee -a $OUT/sanitizers.txt
  done
done
timeout 330 python3 bench/suite/run.py --ab .carry/s17a .carry/s17b --interleave --rounds 4 \
  --only '^bwd\.(wu002\.blocks10|s16384\.none|s8192\.docs12)$' --out $OUT/ab 2>&1 | grep "^|"
