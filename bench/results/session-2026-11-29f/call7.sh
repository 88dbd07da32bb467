#!/usr/bin/env bash
# Call 7: compute-sanitizer on the forward's dense-list kernels of head dims 64 and 256, every
# geometry (the thirty-seventh session covered head dim 128). d060ee1.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k38a/fm.xz H "$(cat .carry/k38a/COMMIT)"
for tool in memcheck synccheck racecheck; do
  for cases in "blocks random 10% d64 broadcast" "blocks random 50% d256 per-head"; do
    timeout 80 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/H/fragmask attention --selftest --cases "$cases" > /tmp/san.txt 2>&1
    rc=$?
    echo "$tool '$cases' rc=$rc pass=$(grep -c '^PASS' /tmp/san.txt) fail=$(grep -c '^FAIL' /tmp/san.txt) $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' /tmp/san.txt | tail -1)"
  done
done 2>&1 | tee "$OUT/sanitizers.txt"
