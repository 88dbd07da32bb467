#!/usr/bin/env bash
# Call 6: compute-sanitizer on the backward's dense-list kernels of the other head dims and
# configurations (call 1 covered the deterministic head-dim-128 one): head dim 64 (wide step,
# K/V in registers), 256 (pair mode), 128 with and without the dQ writer warp. d060ee1.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k38a/fm.xz H "$(cat .carry/k38a/COMMIT)"
i=0
for tool in memcheck synccheck racecheck; do
  for cases in "wide step: [128x128] random 50% odd" "[128x128] random 50% d256" "[128x128] random 50% 300x280 d128"; do
    i=$((i+1))
    timeout 45 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/H/fragmask attention --backward --selftest --cases "$cases" > "$OUT/san-$i.txt" 2>&1
    rc=$?
    echo "$tool '$cases' rc=$rc pass=$(grep -c '^PASS' "$OUT/san-$i.txt") fail=$(grep -c '^FAIL' "$OUT/san-$i.txt") $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' "$OUT/san-$i.txt" | tail -1)"
  done
done 2>&1 | tee "$OUT/sanitizers.txt"
