#!/usr/bin/env bash
# fragmask against FlashAttention-4 with the order alternating (run.py --repeat 4: F4, 4F,
# F4, 4F), on the rows where FA4 leads or is level; results stay in this folder (two systems
# only, so not a suite file for the report).
set -uo pipefail
source bench/suite/device_env.sh
site=$(fm_install .carry/w27)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
only='^(fwd[.](s16384[.](none|causal)|d64[.]s16384[.](none|causal))|bwd[.](s16384[.](none|causal|window1024)|d64[.]s16384[.]causal|gqa64[.]s16384[.]causal))$'
timeout 500 python3 bench/suite/run.py --only "$only" --systems fragmask,fa4 --repeat 4 --site "$site" \
    --commit c9e626f --fa4 /tmp/fa4site --output "$OUT/order-c9e626f.jsonl" --budget-s 420 2>&1 | grep -v "^#   " | tail -30
