#!/usr/bin/env bash
# Call 1 (k34a, HEAD ddc919c): the sanitizer items left by the thirty-third session.
set -uo pipefail
source bench/suite/device_env.sh
name=k34a; commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
bin=/tmp/$name/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
# 1. racecheck over the 64x64/2x2 geometry's forward selftest (holds the 12 cases the last sweeps missed).
SECONDS=0
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 99 $bin attention --selftest --block 64x64/2x2 > $OUT/fwd-2x2-racecheck.txt 2>&1
echo "racecheck fwd 64x64/2x2 rc=$? ${SECONDS}s $(grep -c '^PASS' $OUT/fwd-2x2-racecheck.txt) pass $(grep -c '^FAIL' $OUT/fwd-2x2-racecheck.txt) fail $(grep -o 'RACECHECK SUMMARY: .*' $OUT/fwd-2x2-racecheck.txt | tail -1)"
# 2. the two CLI sanitizer cases added last session.
SECONDS=0
CASES='^bwd-(64tok-paired-odd|128x64)$' timeout 150 bash bench/suite/sanitize.sh /tmp/$name > $OUT/sanitize-cli.txt 2>&1
echo "sanitize.sh rc=$? ${SECONDS}s"; tail -8 $OUT/sanitize-cli.txt
# 3. the 128x64 backward at head dim 128: writer warp (spills 28 bytes) against none.
timeout 200 python3 bench/results/session-2026-11-29b/pairs128x64.py $bin 3 2>&1 | tee $OUT/pairs128x64.txt
