#!/usr/bin/env bash
# For the next device session (not run yet): the backward's dP^T wait moved by a pin, timed against
# the unpinned kernels of the same binary (.carry/k30c: 0cb6065 + probe-env-bwd-pin.patch; without
# FRAGMASK_PROBE_BWD_PIN its kernels are main's but for one blank line of source).
#   PIN=max24 bash bench/results/session-2026-11-28k/bwd-pin-probe/ab.sh     # or sum, sum24, last
# 1. the backward selftest's D=128 cases with the pin; 2. interleaved ABBA pairs over the backward rows.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k30c/fm.xz A "$(cat .carry/k30c/COMMIT)"
mkdir -p /tmp/B && printf '#!/bin/sh\nFRAGMASK_PROBE_BWD_PIN=%s exec /tmp/A/fragmask "$@"\n' "${PIN:-max24}" > /tmp/B/fragmask
chmod +x /tmp/B/fragmask && echo "bwdpin-${PIN:-max24}" > /tmp/B/COMMIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout ${SELFTEST_S:-150} /tmp/B/fragmask attention --selftest --backward --cases d128 > $OUT/selftest.txt 2>&1
echo "selftest rc=$? pass $(grep -c '^PASS' $OUT/selftest.txt) fail $(grep -c '^FAIL' $OUT/selftest.txt)"
timeout ${AB_S:-400} python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds ${ROUNDS:-3} --warmup-ms 500 \
    --systems fragmask_cli --only "${ONLY:-^bwd[.](s16384[.](none|causal|window1024|docs12|random50)|s8192[.]none|d64[.]s16384[.]causal|gqa[.]s16384[.]causal)$}" \
    --out $OUT/ab 2>&1 | grep -v '^bwd[.]' | tail -14
