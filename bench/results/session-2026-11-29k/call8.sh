#!/usr/bin/env bash
# Branch h/det-paired (deterministic paired key blocks) against main (a1986bd's kernels):
# the backward selftest's paired cases (a hang guard too), write-up 002's deterministic
# rows A/B, then memcheck, racecheck and synccheck on the two new paired cases.
source bench/suite/device_env.sh
K=.carry/k43e; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_dp.xz dp "$(cat $K/COMMIT_dp)"
M=/tmp/main/fragmask; B=/tmp/dp/fragmask; S=bench/results/session-2026-11-29k
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 90 $B attention --backward --selftest --cases "paired" > $R/selftest-paired.txt 2>&1; rc=$?
echo "selftest paired rc=$rc $(grep -c '^PASS' $R/selftest-paired.txt) pass"; grep "^FAIL" $R/selftest-paired.txt | head -3; [ $rc -eq 0 ] || exit 1
timeout 120 python3 $S/binab.py $M $B 'bwd[.]wu002[.]blocks(10|50)$' 2 "--deterministic" > $R/ab-det-paired.txt 2>&1; echo "ab rc=$?"; cut -c1-230 $R/ab-det-paired.txt
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [64x64] paired block-sparse x5" "deterministic [64x64] paired random 50% gqa"; do
    tag=$(echo $c | cut -c30-50 | tr -c 'a-z0-9' '_')
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
