#!/usr/bin/env bash
# Forward knobs of the 128x128 tile-list kernels against the defaults, one binary (c9e626f's
# kernels), ABBA pairs per row: Q in registers, with and without ping-pong.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/a28/fm.xz a28 c9e626f
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m bench.suite.flag_pairs /tmp/a28/fragmask \
    '^fwd[.](s16384[.](random50|random10|topk8|blocksparse10)|s4096[.]random50|s8192[.]random50)$' 3 \
    "--q-registers true" "--q-registers true --pingpong true" 2>&1 | tee $OUT/knobs.txt
