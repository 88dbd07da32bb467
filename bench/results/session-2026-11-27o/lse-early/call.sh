#!/usr/bin/env bash
# H100: lse/Dsum column pairs loaded under the S^T/dP^T GEMMs (new) against 900bbff (base): backward selftest, sanitizers, A/B.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
T0=$(date +%s); W=/tmp/s15; mkdir -p $W $OUT/c
el() { echo $(( $(date +%s) - T0 )); }
cp .carry/s15/new/fragmask $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/c/device.txt
timeout 300 python3 bench/suite/run.py --ab .carry/s15/base .carry/s15/new --interleave --rounds 2 \
  --only '^bwd\.(s16384\.(none|causal|window1024|random50|docs12)|s8192\.none|d64\.s16384\.(none|causal)|gqa\.s16384\.causal|wu002\.blocks10)$' --out $OUT/ab 2>&1 | grep -v "^#" | tail -16
echo "ab $(el) s"
timeout 150 $W/fm attention --selftest --backward > $OUT/c/selftest-bwd.txt 2>&1; echo "bwd selftest rc=$? $(tail -1 $OUT/c/selftest-bwd.txt) $(el) s"
grep -v "^PASS\|^ok" $OUT/c/selftest-bwd.txt | head -5
for args in "--random 1,2,2,300,300,128 --causal --backward" "--random 1,2,2,300,300,64 --causal --backward"; do
  for t in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 99 $W/fm attention $args > $W/san.txt 2>&1; echo "$t [$args] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $W/san.txt | tail -1)" | tee -a $OUT/c/sanitizers.txt
  done
done
echo "done $(el) s"
