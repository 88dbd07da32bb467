#!/usr/bin/env bash
# Next session's first call: branch h/det-paired (deterministic paired key blocks, e4b6598)
# against main. Build both binaries (strip + xz) into .carry/$DIR as fm_main.xz / fm_dp.xz
# with COMMIT_main / COMMIT_dp, then:  DIR=k44a bash bench/results/session-2026-11-29k/next/call1.sh
# 1. the backward selftest's paired cases (also the hang guard: its first run, with the
#    consumers' turns, hung at "deterministic [64x64] paired block-sparse"; the turns are now
#    in the writer warp only); 2. write-up 002's deterministic rows, main against the branch,
#    2 ABBA pairs; 3. memcheck, racecheck and synccheck on the two paired cases; 4. the
#    Python GPU tests (the 64x64 deterministic test now expects paired plans). About 300 s.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_dp.xz dp "$(cat $K/COMMIT_dp)"
M=/tmp/main/fragmask; B=/tmp/dp/fragmask; S=bench/results/session-2026-11-29k
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $B attention --backward --selftest --cases "deterministic [64x64] paired block-sparse" > $R/guard.txt 2>&1; rc=$?
echo "guard rc=$rc"; tail -c 400 $R/guard.txt; [ $rc -eq 0 ] || exit 1
timeout 90 $B attention --backward --selftest --cases "paired" > $R/selftest-paired.txt 2>&1
echo "selftest paired rc=$? $(grep -c '^PASS' $R/selftest-paired.txt) pass"; grep "^FAIL" $R/selftest-paired.txt | head -3
timeout 120 python3 $S/binab.py $M $B 'bwd[.]wu002[.]blocks(10|50)$' 2 "--deterministic" > $R/ab-det-paired.txt 2>&1; echo "ab rc=$?"; cut -c1-230 $R/ab-det-paired.txt
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [64x64] paired block-sparse x5" "deterministic [64x64] paired random 50% gqa"; do
    tag=$(echo $c | cut -c30-50 | tr -c 'a-z0-9' '_')
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
if ls $K/*.whl >/dev/null 2>&1; then
  site=$(fm_install $K)
  (cd crates/python/tests && PYTHONPATH=$site timeout 200 python3 -m unittest test_gpu test_torch) > $R/pytests.txt 2>&1; echo "pytests rc=$?"
  grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" $R/pytests.txt | head
fi
