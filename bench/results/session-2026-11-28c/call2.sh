#!/usr/bin/env bash
# Call 2 (1 GPU): P packed before the PV wait in the window/documents overlapped loops (B, working
# tree on c9e626f) against c9e626f (A): interleaved A/B of the D=64 and the main S=16384 rows, then
# the forward selftest over every geometry on B.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
fm_unxz .carry/a28/fm.xz A c9e626f; fm_unxz .carry/b28/fm.xz B pack-early
SECONDS=0
timeout 330 python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 2 --systems fragmask_cli \
  --only '^fwd[.](d64[.]s16384[.](none|causal)|s16384[.](none|causal|window1024|docs12)|d256[.]s16384[.](none|causal))$' \
  --out $OUT/ab > $OUT/ab.txt 2>&1; echo "ab rc=$? ${SECONDS}s"
SECONDS=0
timeout 200 /tmp/B/fragmask attention --selftest > $OUT/selftest.txt 2>&1; echo "selftest rc=$? ${SECONDS}s"
grep -ci "fail" $OUT/selftest.txt; tail -2 $OUT/selftest.txt
tail -14 $OUT/ab.txt
