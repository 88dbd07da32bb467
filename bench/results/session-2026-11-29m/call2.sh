#!/usr/bin/env bash
# The dQ writer's full-barrier arrive with a constant id (h/dq-arrive-imm) against main's
# kernels (ad60bfd: the same SASS as 86f90f4). DIR=k45b: fm_main.xz, fm_imm.xz.
# 1. guard; 2. A/B on 11 backward rows, 3 ABBA pairs; 3. sanitizers on three writer kernels;
# 4. the head-dim-128 and paired selftest cases.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_imm.xz imm "$(cat $K/COMMIT_imm)"
M=/tmp/main/fragmask; B=/tmp/imm/fragmask; S=bench/results/session-2026-11-29k   # binab.py (the call ran a byte-identical copy from this folder)
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $B attention --backward --selftest --cases "none odd 200x317 d128" > $R/guard.txt 2>&1; rc=$?
echo "guard rc=$rc"; tail -c 200 $R/guard.txt; [ $rc -eq 0 ] || exit 1
timeout 330 python3 $S/binab.py $M $B '^bwd[.](s16384[.](none|causal|window1024|random50|docs12|none[.]det)|gqa[.]s16384[.]causal|s8192[.]none|d64[.]s16384[.]none|wu002[.]blocks(10|50))$' 3 "" > $R/ab.txt 2>&1; echo "ab rc=$?"
for tool in memcheck racecheck synccheck; do
  for c in "none odd 200x317 d128" "paired random 50% odd 11 key blocks" "[64x64] random 50% d128"; do
    tag=$(echo $c | tr -c 'a-z0-9' '_' | cut -c1-24)
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
timeout 90 $B attention --backward --selftest --cases "d128" > $R/selftest-d128.txt 2>&1
echo "selftest d128 rc=$? $(grep -c '^PASS' $R/selftest-d128.txt) pass $(grep -c '^FAIL' $R/selftest-d128.txt) fail"
timeout 60 $B attention --backward --selftest --cases "paired" > $R/selftest-paired.txt 2>&1
echo "selftest paired rc=$? $(grep -c '^PASS' $R/selftest-paired.txt) pass $(grep -c '^FAIL' $R/selftest-paired.txt) fail"
cut -c1-110 $R/ab.txt
