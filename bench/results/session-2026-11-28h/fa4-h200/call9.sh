#!/usr/bin/env bash
# Call 9 (after fa4_install.sh p1, p2 in the two calls before, machine kept warm): FA4's D=128 causal
# backward under Nsight Compute on this H200, then the rows where FA4 led on the H100 beside FA4
# (run.py --repeat 3, order alternating), HEAD's kernels (x30c binary, no experiment variable set).
set -uo pipefail
bash bench/suite/fa4_install.sh .carry/fa4x/p3 | tail -2
source bench/suite/device_env.sh
[ -x /tmp/A/fragmask ] || fm_unxz .carry/x30/fm.xz A x30c
NCU_BUNDLE=1 bash bench/suite/ncu_pair.sh .carry/p29 fa4 bwd --causal
only='^(fwd[.](s16384[.](none|causal)|d64[.]s16384[.](none|causal))|bwd[.](s16384[.](none|causal|window1024)|d64[.]s16384[.]causal|gqa64[.]s16384[.]causal))$'
timeout 420 python3 bench/suite/run.py --only "$only" --systems fragmask_cli,fa4 --repeat 3 \
    --commit a390b87 --bin /tmp/A/fragmask --fa4 /tmp/fa4site --output "$OUT/order-a390b87-h200.jsonl" --budget-s 380 2>&1 | grep -v "^#   " | tail -24
