#!/usr/bin/env bash
# Call 4: every non-deterministic backward row of the suite through the Python op, c7990ce
# (k40b: the largest-first order from the GPU transposer or the host at planning) against
# 0728792 (k39f: the same backward kernels; the deterministic rows differ by 4ebecb9 and
# are left out), one round: the whole backward table's A/B of this session's change.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k40b/fm.xz N "$(cat .carry/k40b/COMMIT)" && cp .carry/k40b/*.whl /tmp/N/
fm_unxz .carry/k39f/fm.xz B "$(cat .carry/k39f/COMMIT)" && cp .carry/k39f/*.whl /tmp/B/
timeout 560 python3 bench/suite/run.py --ab /tmp/B /tmp/N --rounds 1 --systems fragmask \
  --only '^bwd[.]((s16384|s8192|s4096)[.][a-z0-9]+|(d64|d256|gqa|gqa64)[.]s[0-9]+[.][a-z0-9]+|wu002[.]blocks[0-9]+)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?"
rm -rf "$OUT"/ab-*-rounds
grep -E "^\| bwd" "$OUT/ab.log"
