#!/usr/bin/env bash
# Call 3: the rest of the forward table, HEAD's parent (k32a) against the 3-stage list kernels (k32c),
# 2 interleaved ABBA pairs (their kernels are unchanged); then head dim 64's lists on the 128x128 tile
# (the bias written ahead) against the default 192x128 tile (the bias at the top), one binary, 3 pairs.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k32a/fm.xz A "$(cat .carry/k32a/COMMIT)"
fm_unxz .carry/k32c/fm.xz C "$(cat .carry/k32c/COMMIT)"
mkdir -p /tmp/D && printf '#!/bin/sh\nexec /tmp/C/fragmask "$@" --block 128x128\n' > /tmp/D/fragmask && chmod +x /tmp/D/fragmask
echo "$(cat /tmp/C/COMMIT)-block128x128" > /tmp/D/COMMIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
rest='^fwd[.]((s4096)[.](none|causal|window1024|docs12)|s8192[.](none|causal|docs12)|s16384[.](causal|window1024|docs12)|d64[.]s16384[.](none|causal|random50)|d256[.]s16384[.]causal|gqa64?[.]s16384[.]causal|wu002[.].*)$'
timeout 330 python3 bench/suite/run.py --ab /tmp/A /tmp/C --interleave --rounds 2 --warmup-ms 500 \
    --systems fragmask_cli --only "$rest" --out $OUT/ab 2>&1 | grep -v '^[fb]wd[.]' | tail -24
timeout 120 python3 bench/suite/run.py --ab /tmp/C /tmp/D --interleave --rounds 3 --warmup-ms 500 \
    --systems fragmask_cli --only '^fwd[.]d64[.]s16384[.]random50$' --out $OUT/d64 2>&1 | grep -v '^[fb]wd[.]' | tail -4
