#!/usr/bin/env bash
# Call 6: 3 K/V stages on head dim 128's window and documents kernels (128x128, Q in registers; default 2,
# measured long before the current loop), one binary (1910ff1) with and without `--stages 3`, 3 ABBA pairs.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k32g/fm.xz G "$(cat .carry/k32g/COMMIT)"
mkdir -p /tmp/G3 && printf '#!/bin/sh\nexec /tmp/G/fragmask "$@" --stages 3\n' > /tmp/G3/fragmask && chmod +x /tmp/G3/fragmask
echo "$(cat /tmp/G/COMMIT)-stages3" > /tmp/G3/COMMIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 500 python3 bench/suite/run.py --ab /tmp/G /tmp/G3 --interleave --rounds 3 --warmup-ms 500 \
    --systems fragmask_cli --only '^fwd[.](s16384[.](none|causal|window1024|docs12)|s8192[.](none|causal)|s4096[.]none|gqa[.]s16384[.]causal)$' \
    --out $OUT/stages3 2>&1 | grep '^| fwd'
