#!/usr/bin/env bash
# H100: window walks highest query step first (not in the deterministic mode), against 900bbff.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
T0=$(date +%s); W=/tmp/s15; mkdir -p $W $OUT/c
el() { echo $(( $(date +%s) - T0 )); }
cp .carry/s15/new/fragmask $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/c/device.txt
timeout 300 python3 bench/suite/run.py --ab .carry/s15/base .carry/s15/new --interleave --rounds 2 \
  --only '^bwd\.(s16384\.(none|causal|window1024|docs12)|s8192\.(none|docs12)|d64\.s16384\.(none|causal)|gqa\.s16384\.causal|d256\.s16384\.causal)$' --out $OUT/ab 2>&1 | grep -v "^#" | grep "^|" | tail -12
echo "ab $(el) s"
timeout 170 $W/fm attention --selftest --backward > $OUT/c/selftest-bwd.txt 2>&1; echo "bwd selftest rc=$? $(tail -1 $OUT/c/selftest-bwd.txt) $(el) s"
grep -i "fail" $OUT/c/selftest-bwd.txt | grep -v "0 failure" | head -5
python3 -c "import numpy as np; np.save('/tmp/s15/ids.npy', np.repeat(np.arange(3), [100, 150, 83]).astype(np.int32))"
for args in "--random 1,2,2,300,300,128 --causal --backward" "--random 1,2,2,300,300,64 --causal --backward" "--random 2,2,2,333,333,128 --predicate causal,doc=/tmp/s15/ids.npy --backward" "--random 1,8,2,300,300,128 --causal --backward"; do
  for t in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $t --error-exitcode 99 $W/fm attention $args > $W/san.txt 2>&1; echo "$t [$args] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $W/san.txt | tail -1)" | tee -a $OUT/c/sanitizers.txt
  done
done
echo "done $(el) s"
