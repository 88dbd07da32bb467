#!/usr/bin/env bash
# Call 2: 3 K/V stages on the 128x128 list kernels at head dim 128 (k32c) against HEAD (k32a):
# the forward CLI cases byte for byte, the 128x128 selftest, the sanitizers on the list cases.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k32a/fm.xz A "$(cat .carry/k32a/COMMIT)"
fm_unxz .carry/k32c/fm.xz C "$(cat .carry/k32c/COMMIT)"
source bench/suite/same_outputs.sh
fm_same_outputs /tmp/A/fragmask /tmp/C/fragmask 2>&1 | tail -3
timeout 260 /tmp/C/fragmask attention --selftest --block 128x128 > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"
grep -c -i "ok\b\|pass" $OUT/selftest.txt; grep -i "fail\|error" $OUT/selftest.txt | tail -5; tail -3 $OUT/selftest.txt
CASES='^fwd-(random50|gqa-blocksparse|tail-random50|splitkv|docs|docs-tail|docs-persistent|64tok-tail)$' \
  timeout 230 bash bench/suite/sanitize.sh /tmp/C 2>&1 | tail -26
