#!/usr/bin/env bash
# The shared-K/V forward with the producer releasing skipped steps (a: .carry/s29a, the pending
# PV finished at a skip; b: .carry/s29b, held across skips) against c166fc8 (.carry/q29):
# selftest on the 64x64/2x2 tile and sanitizers on the shared-K/V cases for both, then 3
# interleaved ABBA pairs each on the VSA forward rows. Arguments: the two builds (default
# s29a s29b; validate_producer_skips_ahead.sh passes s29c s29d).
set -uo pipefail
source bench/suite/device_env.sh
builds="${1:-s29a} ${2:-s29b}"
for b in q29 $builds; do [ -x /tmp/$b/fragmask ] || fm_unxz .carry/$b/fm.xz $b "$(cat .carry/$b/COMMIT)"; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in $builds; do
  timeout 100 /tmp/$b/fragmask attention --selftest --block 64x64/2x2 > $OUT/selftest_$b.txt 2>&1
  echo "$b selftest rc=$? ${SECONDS}s $(tail -1 $OUT/selftest_$b.txt) PASS=$(grep -c '^PASS' $OUT/selftest_$b.txt)"
  grep "^FAIL" $OUT/selftest_$b.txt | head -3
  CASES='^fwd-64tok-shared-kv' timeout 100 bash bench/suite/sanitize.sh /tmp/$b > $OUT/sanitize_$b.txt 2>&1
  echo "$b sanitize rc=$? ${SECONDS}s"; tail -6 $OUT/sanitize_$b.txt
done
for b in $builds; do
  timeout 170 python3 bench/suite/run.py --ab /tmp/q29 /tmp/$b --interleave --rounds 3 --systems fragmask_cli \
    --only '^fwd[.]wu002[.]blocks(10|50)v?$' --out $OUT/ab > $OUT/ab_$b.txt 2>&1
  echo "ab $b rc=$? ${SECONDS}s"; grep -E "B/A" $OUT/ab_$b.txt
done
