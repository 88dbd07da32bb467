#!/usr/bin/env bash
# A/B of two carried builds (A_DIR, B_DIR: fm.xz + COMMIT) on the forward's tile-list rows plus a control:
# outputs byte for byte first (bench/suite/same_outputs.sh), then interleaved ABBA pairs.
#   A_DIR=.carry/k31a B_DIR=.carry/k31b bash bench/results/session-2026-11-28l/ab.sh
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz "${A_DIR:?}/fm.xz" A "$(cat $A_DIR/COMMIT)"
fm_unxz "${B_DIR:?}/fm.xz" B "$(cat $B_DIR/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
source bench/suite/same_outputs.sh
fm_same_outputs /tmp/A/fragmask /tmp/B/fragmask
only='^fwd[.](s16384[.](none|random50|random10|blocksparse10|topk8)|s8192[.]random50|s4096[.](random50|random10|blocksparse10|topk8)|wu002[.].*)$'
timeout ${AB_S:-450} python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds ${ROUNDS:-3} --warmup-ms 500 \
    --systems fragmask_cli --only "${ONLY:-$only}" --out $OUT/ab 2>&1 | grep -v '^[fb]wd[.]' | tail -18
