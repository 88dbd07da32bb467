#!/usr/bin/env bash
# Timing probe (wrong sums): the forward with its 64 row-sum FADDs per step replaced by an
# XOR of every P that keeps the PV wait's pin (no-rowsum-fadds.patch, .carry/p29) against
# 50a45e2 (.carry/h29, the same kernels as HEAD's), interleaved ABBA pairs, CLI rows.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/h29/fm.xz A "$(cat .carry/h29/COMMIT)"
fm_unxz .carry/p29/fm.xz B "$(cat .carry/p29/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 4 --warmup-ms 500 \
    --systems fragmask_cli --only '^fwd[.](d64[.]s16384[.](none|causal)|s16384[.]none)$' --out $OUT/ab 2>&1 | tail -12
