#!/usr/bin/env bash
# H100: window walks highest query step first (900bbff+desc) against 900bbff: 3 more interleaved rounds, Python tests.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
T0=$(date +%s); W=/tmp/s15; mkdir -p $W $OUT/c
el() { echo $(( $(date +%s) - T0 )); }
cp .carry/s15/new/fragmask $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/c/device.txt
timeout 330 python3 bench/suite/run.py --ab .carry/s15/base .carry/s15/new --interleave --rounds 4 \
  --only '^bwd\.(s16384\.causal|d64\.s16384\.causal|gqa\.s16384\.causal)$' --out $OUT/ab 2>&1 | grep -v "^#" | grep "^|" | tail -10
echo "ab $(el) s"
source bench/suite/device_env.sh
