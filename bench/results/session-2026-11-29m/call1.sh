#!/usr/bin/env bash
# The dQ chunk in flight from an even step into the odd step (h/dk-in-flight, 05d56d9) against
# main's non-deterministic backward kernels (ad60bfd: the same SASS as 86f90f4).
# DIR=k45a: fm_main.xz / COMMIT_main, fm_dqf.xz / COMMIT_dqf.
# 1. a guard case; 2. A/B on 8 backward rows, 2 ABBA pairs; 3. memcheck, racecheck, synccheck
# on an odd-step case and a random-mask case; 4. the head-dim-128 selftest cases.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_dqf.xz dqf "$(cat $K/COMMIT_dqf)"
M=/tmp/main/fragmask; B=/tmp/dqf/fragmask; S=bench/results/session-2026-11-29k   # binab.py (the call ran a byte-identical copy from this folder)
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $B attention --backward --selftest --cases "none odd 200x317 d128" > $R/guard.txt 2>&1; rc=$?
echo "guard rc=$rc"; tail -c 300 $R/guard.txt; [ $rc -eq 0 ] || exit 1
timeout 260 python3 $S/binab.py $M $B '^bwd[.](s16384[.](none|causal|window1024|random50|docs12)|gqa[.]s16384[.]causal|s8192[.]none|d64[.]s16384[.]none)$' 2 "" > $R/ab.txt 2>&1; echo "ab rc=$?"
for tool in memcheck racecheck synccheck; do
  for c in "none odd 200x317 d128" "[128x128] random 50% 300x280 d128"; do
    tag=$(echo $c | tr -c 'a-z0-9' '_' | cut -c1-24)
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
timeout 100 $B attention --backward --selftest --cases "d128" > $R/selftest-d128.txt 2>&1
echo "selftest d128 rc=$? $(grep -c '^PASS' $R/selftest-d128.txt) pass $(grep -c '^FAIL' $R/selftest-d128.txt) fail"
cut -c1-150 $R/ab.txt
