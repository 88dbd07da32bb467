#!/usr/bin/env bash
# A/B of the backward's per-stage release (B, uncommitted build on 7f17e8e+) against c9e626f (A).
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/a28/fm.xz a28 c9e626f
fm_unxz .carry/r23/fm.xz r23 release
timeout 95 python3 bench/suite/run.py --ab /tmp/a28 /tmp/r23 --interleave --rounds 1 --systems fragmask_cli \
    --only '^bwd[.]s16384[.](none|causal|window1024)$' --out $OUT/ab 2>&1 | tail -8
