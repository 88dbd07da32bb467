#!/usr/bin/env bash
# Call 9 (H100): Mask.from_blocks at the VSA shape without with_transposed(), e475847's wheel (GPU-built transposed lists) and 93aac8d's (CPU-built).
set -uo pipefail
source bench/suite/device_env.sh
for w in w24 w25; do
  s=$(fm_install .carry/$w)
  PYTHONPATH=$s timeout 100 python3 bench/results/session-2026-11-28b/from_blocks_vsa.py > $OUT/from_blocks_$w.txt 2>&1; echo "$w rc=$?"
  tail -5 $OUT/from_blocks_$w.txt
done
