#!/usr/bin/env bash
# Call 6: dense tile lists (ad66ae0, B) against 2ee5bb4 (A: the same forward kernels as before them):
# B's forward selftest on every tile-list case, compute-sanitizer on a dense case, then the
# forward list rows interleaved (2 ABBA rounds, the CLI), no mask as the control.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k37c/fm.xz A 2ee5bb4
fm_unxz .carry/k37d/fm.xz B "$(cat .carry/k37d/COMMIT)"
SECONDS=0
timeout 100 /tmp/B/fragmask attention --selftest --cases blocks > "$OUT/selftest-blocks-B.txt" 2>&1
echo "B selftest blocks rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-blocks-B.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-blocks-B.txt") ${SECONDS}s"
for tool in memcheck racecheck synccheck; do
  SECONDS=0
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/B/fragmask attention --selftest --cases "blocks random 50% d128 per-head" > "$OUT/san-$tool.txt" 2>&1
  echo "$tool rc=$? pass=$(grep -c '^PASS' "$OUT/san-$tool.txt") ${SECONDS}s $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-$tool.txt" | tail -1)"
done
timeout 230 python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 2 \
  --only '^fwd[.](s16384[.](random50|random10|topk8|none)|d64[.]s16384[.]random50|d256[.]s16384[.]random50)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?"; tail -14 "$OUT/ab.log"
