#!/usr/bin/env bash
# Call 1: the lse-ahead experiment (FM_EXP_LSE_AHEAD=1, same binary): backward selftest, then A/B.
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30-base
mkdir -p /tmp/B && printf '#!/bin/sh\nFM_EXP_LSE_AHEAD=1 exec /tmp/A/fragmask "$@"\n' > /tmp/B/fragmask && chmod +x /tmp/B/fragmask && echo x30-lse-ahead > /tmp/B/COMMIT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/device.txt
( time FM_EXP_LSE_AHEAD=1 timeout 240 /tmp/A/fragmask attention --selftest --backward ) > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"; grep -iE "fail|pass|cases" $OUT/selftest.txt | tail -5
python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 2 --systems fragmask_cli \
  --only '^bwd[.](s16384[.](none|causal|window1024|random50|docs12)|s8192[.]none|gqa[.]s16384[.]causal|wu002[.]blocks10)$' --out $OUT/ab > $OUT/ab.log 2>&1
tail -25 $OUT/ab.log
