#!/usr/bin/env bash
# Probe: which value pins the forward's PV wait (FRAGMASK_PROBE_PIN, read by the generator of
# the probe build .carry/k30 = 628050f + the probe). A = the row sum (main's kernels, byte for
# byte), B = corr (the wait right after the row max, FlashAttention-4's SASS order).
# 1. O and lse of every forward case of cli_cases.sh equal byte for byte between A and B
#    (bench/suite/same_outputs.sh; the loop was inline in this script when it ran, same steps).
# 2. Interleaved ABBA pairs over the forward rows whose kernels change.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k30/fm.xz A "$(cat .carry/k30/COMMIT)"
mkdir -p /tmp/B && printf '#!/bin/sh\nFRAGMASK_PROBE_PIN=${PIN:-corr} exec /tmp/A/fragmask "$@"\n' > /tmp/B/fragmask && chmod +x /tmp/B/fragmask
echo "pin-${PIN:-corr}" > /tmp/B/COMMIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
source bench/suite/same_outputs.sh
fm_same_outputs /tmp/A/fragmask /tmp/B/fragmask
timeout ${AB_S:-420} python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds ${ROUNDS:-3} --warmup-ms 500 \
    --systems fragmask_cli --only "${ONLY:-^fwd[.](s16384[.](none|causal|window1024|docs12|random50)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|s8192[.](none|causal)|s4096[.]causal)$}" --out $OUT/ab 2>&1 | tail -22
