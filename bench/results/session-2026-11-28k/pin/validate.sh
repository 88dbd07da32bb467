#!/usr/bin/env bash
# The pin on corr as built (.carry/k30b: both overlapped loops, the shared-K/V one too) against
# main's kernels (.carry/k30 without FRAGMASK_PROBE_PIN = 628050f's kernels byte for byte):
# 1. O and lse of every forward case of cli_cases.sh equal byte for byte (bench/suite/same_outputs.sh;
#    the loop was inline in this script when it ran, same steps);
# 2. the forward selftest (every geometry) of the new build;
# 3. memcheck, racecheck, synccheck on the forward cases;
# 4. interleaved ABBA pairs on the rows of the shared-K/V loop (write-up 002) and two controls.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k30/fm.xz A "$(cat .carry/k30/COMMIT)"
fm_unxz .carry/k30b/fm.xz B "$(cat .carry/k30b/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
source bench/suite/same_outputs.sh
fm_same_outputs /tmp/A/fragmask /tmp/B/fragmask
start=$SECONDS
timeout ${SELFTEST_S:-200} /tmp/B/fragmask attention --selftest > $OUT/selftest.txt 2>&1; echo "selftest rc=$? in $((SECONDS-start)) s"; tail -3 $OUT/selftest.txt
start=$SECONDS
CASES='^fwd' bash bench/suite/sanitize.sh /tmp/B > $OUT/sanitize.txt 2>&1; echo "sanitizers in $((SECONDS-start)) s"
grep -c "rc=0 " $OUT/sanitize.txt; grep -v "rc=0 " $OUT/sanitize.txt | head
timeout ${AB_S:-200} python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds ${ROUNDS:-3} --warmup-ms 500 \
    --systems fragmask_cli --only "${ONLY:-^fwd[.](wu002[.]blocks(10|50|10v|50v)|s16384[.]none|d64[.]s16384[.]causal)$}" --out $OUT/ab 2>&1 | grep -v "^fwd[.]" | tail -12
