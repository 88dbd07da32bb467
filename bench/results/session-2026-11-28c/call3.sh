#!/usr/bin/env bash
# Call 3 (1 GPU): O rescaled after the PV wait, beside P's conversion (FlashAttention-4's order), in
# the one-block overlapped loop (C, working tree on c9e626f) against c9e626f (A), with the lazy
# rescale (C's default) and without it (C --lazy-rescale false, one binary, ABBA pairs).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
fm_unxz .carry/a28/fm.xz A c9e626f; fm_unxz .carry/c28/fm.xz C o-after-wait
rows='^fwd[.](d64[.]s16384[.](none|causal)|s16384[.](none|causal|window1024|docs12))$'
SECONDS=0
timeout 200 python3 bench/suite/run.py --ab /tmp/A /tmp/C --interleave --rounds 2 --systems fragmask_cli \
  --only "$rows" --out $OUT/ab > $OUT/ab.txt 2>&1; echo "ab rc=$? ${SECONDS}s"
SECONDS=0
timeout 200 python3 -m bench.suite.flag_pairs /tmp/C/fragmask "$rows" 2 "--lazy-rescale false" > $OUT/lazy.txt 2>&1; echo "flags rc=$? ${SECONDS}s"
tail -8 $OUT/ab.txt | grep "^| fwd"; cat $OUT/lazy.txt | grep fwd
