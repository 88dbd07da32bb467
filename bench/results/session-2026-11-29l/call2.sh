#!/usr/bin/env bash
# Deterministic paired key blocks with the walk orders (h/det-paired-walks) against main.
# DIR=k44b: fm_main.xz / COMMIT_main, fm_dpw.xz / COMMIT_dpw.
# 1. the paired selftest cases (walked in the mode) under timeouts; 2. write-up 002 at
# 5 kept fractions: unpaired det, paired det ascending, paired det walked, non-det (paired);
# 3. the suite's two wu002 det rows, main against the branch, 2 ABBA pairs;
# 4. memcheck, racecheck, synccheck on a walked writer case and a walked consumers' case.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_dpw.xz dpw "$(cat $K/COMMIT_dpw)"
M=/tmp/main/fragmask; B=/tmp/dpw/fragmask; S=bench/results/session-2026-11-29l; S0=bench/results/session-2026-11-29k
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $B attention --backward --selftest --cases "deterministic [64x64] paired block-sparse x5 d128 odd" > $R/guard.txt 2>&1; rc=$?
echo "guard rc=$rc"; tail -c 300 $R/guard.txt; [ $rc -eq 0 ] || exit 1
timeout 120 $B attention --backward --selftest --cases "paired" > $R/selftest-paired.txt 2>&1
echo "selftest paired rc=$? $(grep -c '^PASS' $R/selftest-paired.txt) pass $(grep -c '^FAIL' $R/selftest-paired.txt) fail"
timeout 300 python3 $S/detdens.py $B 2 "0.05 0.1 0.2 0.3 0.5" "--deterministic --paired-keys off" "--deterministic --deterministic-walks off" "--deterministic" "" > $R/dens.txt 2>&1; echo "dens rc=$?"
timeout 120 python3 $S0/binab.py $M $B 'bwd[.]wu002[.]blocks(10|50)$' 2 "--deterministic" > $R/ab.txt 2>&1; echo "ab rc=$?"
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [64x64] paired block-sparse x5" "paired random 50% odd 11 key blocks"; do
    tag=$(echo $c | cut -c30-50 | tr -c 'a-z0-9' '_')
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
cut -c1-150 $R/dens.txt; cut -c1-120 $R/ab.txt
