#!/usr/bin/env bash
# For the next device session (not run yet). One probe binary (.carry/k30d: HEAD + probe-fwd-bwd-pins.patch)
# whose generator reads FRAGMASK_PROBE_PIN (forward: unset = main's corr pin; sum16, sum32, rowsum) and
# FRAGMASK_PROBE_BWD_PIN (backward: unset = main; last, mid, max24, sum24, sum). A = unset, B = a wrapper
# setting VAR=VALUE. Static placements (fragmask attention --inspect): forward PV wait after 11 / 21 / 36
# of 66 exp2s at head dim 64 (corr / sum16 / sum32), 32 / 21 / 37 at 128; backward dP^T wait after 7 (main),
# 10 (last), 8 (mid), 26 (max24, sum24), 32 (sum) of 32 (../bwd-pin-probe/).
#   VAR=FRAGMASK_PROBE_PIN VALUE=sum16 FAMILY=fwd bash bench/results/session-2026-11-28k/next/ab.sh
#   VAR=FRAGMASK_PROBE_BWD_PIN VALUE=max24 FAMILY=bwd bash bench/results/session-2026-11-28k/next/ab.sh
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/A/fragmask ] || fm_unxz .carry/k30d/fm.xz A "$(cat .carry/k30d/COMMIT)"
mkdir -p /tmp/B && printf '#!/bin/sh\n%s=%s exec /tmp/A/fragmask "$@"\n' "${VAR:?}" "${VALUE:?}" > /tmp/B/fragmask
chmod +x /tmp/B/fragmask && echo "$VALUE" > /tmp/B/COMMIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${FAMILY:?fwd or bwd}" = fwd ]; then
  source bench/suite/same_outputs.sh
  fm_same_outputs /tmp/A/fragmask /tmp/B/fragmask
  only='^fwd[.](s16384[.](none|causal|window1024|docs12|random50)|d64[.]s16384[.](none|causal)|d256[.]s16384[.]none|gqa[.]s16384[.]causal|s8192[.]causal)$'
else
  timeout ${SELFTEST_S:-150} /tmp/B/fragmask attention --selftest --backward --cases d128 > $OUT/selftest.txt 2>&1
  echo "selftest rc=$? pass $(grep -c '^PASS' $OUT/selftest.txt) fail $(grep -c '^FAIL' $OUT/selftest.txt)"
  only='^bwd[.](s16384[.](none|causal|window1024|docs12|random50)|s8192[.]none|d64[.]s16384[.]causal|gqa[.]s16384[.]causal)$'
fi
timeout ${AB_S:-400} python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds ${ROUNDS:-3} --warmup-ms 500 \
    --systems fragmask_cli --only "${ONLY:-$only}" --out $OUT/ab 2>&1 | grep -v '^[fb]wd[.]' | tail -14
