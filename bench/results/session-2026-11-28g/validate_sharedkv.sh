#!/usr/bin/env bash
# The shared-K/V forward keeping its pending PV across skipped steps (.carry/r29) against
# c166fc8 (.carry/q29): the forward selftest on the 64x64/2x2 tile, the sanitizers on the
# shared-K/V cases, then 3 interleaved ABBA pairs on the VSA forward rows (the only rows that
# run the changed kernel) and the random-50% row as a control.
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/q29/fragmask ] || fm_unxz .carry/q29/fm.xz q29 "$(cat .carry/q29/COMMIT)"
[ -x /tmp/r29/fragmask ] || fm_unxz .carry/r29/fm.xz r29 "$(cat .carry/r29/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 /tmp/r29/fragmask attention --selftest --block 64x64/2x2 > $OUT/selftest_shared.txt 2>&1
echo "selftest rc=$? ${SECONDS}s $(tail -1 $OUT/selftest_shared.txt) PASS=$(grep -c '^PASS' $OUT/selftest_shared.txt)"
grep "^FAIL" $OUT/selftest_shared.txt | head -5
CASES='^fwd-64tok-shared-kv' timeout 120 bash bench/suite/sanitize.sh /tmp/r29 > $OUT/sanitize_shared.txt 2>&1
echo "sanitize rc=$? ${SECONDS}s"; tail -3 $OUT/sanitize_shared.txt
timeout 330 python3 bench/suite/run.py --ab /tmp/q29 /tmp/r29 --interleave --rounds 3 --systems fragmask_cli \
  --only '^fwd[.](wu002[.]blocks(10|50)v?|s16384[.]random50)$' --out $OUT/ab > $OUT/ab.txt 2>&1
echo "ab rc=$? ${SECONDS}s"; tail -25 $OUT/ab.txt
