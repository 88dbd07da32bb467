#!/usr/bin/env bash
# H100: A/A (one binary under two names) with the counted warm-up only, then with 1 s of timed warm-up.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
export FRAGMASK_CACHE_DIR=/tmp/s15/cache; mkdir -p /tmp/s15
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
ONLY='^bwd\.(s16384\.(none|causal)|d64\.s16384\.causal)$|^fwd\.s16384\.none$'
for ms in 0 1000; do
  timeout 200 python3 bench/suite/run.py --ab .carry/s15/aa1 .carry/s15/aa2 --interleave --rounds 3 --warmup-ms $ms \
    --only "$ONLY" --out $OUT/aa-$ms 2>&1 | grep "^|" | tail -6
  echo "warmup-ms $ms done $(el) s"
done
