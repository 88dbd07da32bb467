#!/usr/bin/env bash
# Call 3: lse read at the step top, before S^T's issue (FM_EXP_LSE_AHEAD=2), 4 ABBA pairs on more rows.
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30b-base
mkdir -p /tmp/B2 && printf '#!/bin/sh\nFM_EXP_LSE_AHEAD=2 exec /tmp/A/fragmask "$@"\n' > /tmp/B2/fragmask && chmod +x /tmp/B2/fragmask && echo x30b-B2 > /tmp/B2/COMMIT
python3 bench/suite/run.py --ab /tmp/A /tmp/B2 --interleave --rounds 4 --systems fragmask_cli \
  --only '^bwd[.](s16384[.](none|causal|window1024|docs12|random50)|s8192[.]causal|s4096[.]causal|gqa[.]s16384[.]causal)$' --out $OUT/ab > $OUT/ab-B2.log 2>&1
grep "B/A" $OUT/ab-B2.log
