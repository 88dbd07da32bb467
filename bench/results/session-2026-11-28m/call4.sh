#!/usr/bin/env bash
# Call 4: head dim 64's list kernel (192x128, 160 registers, the bias at the top of the step) against
# (a) the same without ping-pong, (b) the select pass after the GEMM (k32f, d64-select-pass.patch), (c) both.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k32c/fm.xz C "$(cat .carry/k32c/COMMIT)"
fm_unxz .carry/k32f/fm.xz F "$(cat .carry/k32f/COMMIT)"
for x in C F; do
  mkdir -p /tmp/${x}np && printf "#!/bin/sh\nexec /tmp/$x/fragmask \"\$@\" --pingpong false\n" > /tmp/${x}np/fragmask
  chmod +x /tmp/${x}np/fragmask && echo "$(cat /tmp/$x/COMMIT)-nopp" > /tmp/${x}np/COMMIT
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in Cnp F Fnp; do
  timeout 150 python3 bench/suite/run.py --ab /tmp/C /tmp/$b --interleave --rounds 3 --warmup-ms 500 \
      --systems fragmask_cli --only '^fwd[.]d64[.]s16384[.](random50|none)$' --out $OUT/$b 2>&1 | grep '^| fwd'
done
