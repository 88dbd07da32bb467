#!/usr/bin/env bash
# Call 7 (one command line): call 6's A/B again, 4 rounds, on the rows it left within the noise.
source bench/suite/device_env.sh; fm_unxz .carry/k37c/fm.xz A 2ee5bb4; fm_unxz .carry/k37d/fm.xz B ad66ae0
timeout 170 python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 4 \
  --only '^fwd[.](s16384[.](random50|random10|topk8|none)|d64[.]s16384[.]random50)$' --out "$OUT" > "$OUT/ab.log" 2>&1
