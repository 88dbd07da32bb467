#!/usr/bin/env bash
# The bias written ahead in the shared-K/V loop too (.carry/k31c) against 5531837 (.carry/k31a): outputs byte for
# byte, the shared-tile selftest, sanitizers on the shared cases, then write-up 002's rows and two one-block controls.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k31a/fm.xz A "$(cat .carry/k31a/COMMIT)"
fm_unxz .carry/k31c/fm.xz B "$(cat .carry/k31c/COMMIT)"
source bench/suite/same_outputs.sh
CASES='^fwd-(64tok|random50|tail-random50|gqa-blocksparse|splitkv)' fm_same_outputs /tmp/A/fragmask /tmp/B/fragmask
timeout 60 /tmp/B/fragmask attention --selftest --block 64x64/2x2 > $OUT/selftest-shared.txt 2>&1
echo "shared selftest rc=$? pass $(grep -c '^PASS' $OUT/selftest-shared.txt) fail $(grep -c '^FAIL' $OUT/selftest-shared.txt)"
CASES='^fwd-64tok-shared-kv' timeout 80 bash bench/suite/sanitize.sh /tmp/B 2>&1 | tail -6
only='^fwd[.](wu002[.].*|s16384[.](random50|none))$'
timeout ${AB_S:-200} python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds ${ROUNDS:-3} --warmup-ms 500 \
    --systems fragmask_cli --only "${ONLY:-$only}" --out $OUT/ab 2>&1 | grep -v '^[fb]wd[.]' | tail -10
