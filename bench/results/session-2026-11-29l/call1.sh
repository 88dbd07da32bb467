#!/usr/bin/env bash
# Next session's first call: branch h/det-paired (deterministic paired key blocks, bedc2b0)
# against main. Build both binaries (strip + xz) into .carry/$DIR as fm_main.xz / fm_dp.xz
# with COMMIT_main / COMMIT_dp and the branch's wheel, then:
#   DIR=k44a bash bench/results/session-2026-11-29k/next/call1.sh
# 1. the writer's turns at head dim 128 (the default there) alone, as the hang guard (the
#    branch's first run hung in the consumers' turns at 9d515eb); 2. write-up 002's
#    deterministic rows, main against the branch, 2 ABBA pairs; 3. the consumers' turns
#    (head dim 128 with --dq-writer off, and head dim 64, whose paired kernel has no writer),
#    each case under its own timeout; 4. memcheck, racecheck, synccheck on the writer case and
#    the two consumers' cases; 5. the Python GPU tests. About 350 s.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_dp.xz dp "$(cat $K/COMMIT_dp)"
M=/tmp/main/fragmask; B=/tmp/dp/fragmask; S=bench/results/session-2026-11-29k
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $B attention --backward --selftest --cases "deterministic [64x64] paired block-sparse x5 d128 odd" > $R/guard.txt 2>&1; rc=$?
echo "guard (writer's turns) rc=$rc"; tail -c 400 $R/guard.txt; [ $rc -eq 0 ] || exit 1
timeout 120 python3 $S/binab.py $M $B 'bwd[.]wu002[.]blocks(10|50)$' 2 "--deterministic" > $R/ab-det-paired.txt 2>&1; echo "ab rc=$?"; cut -c1-230 $R/ab-det-paired.txt
for c in "paired random 50% gqa" "paired block-sparse, the consumers' turns" "paired random 50% odd 11 key blocks, the consumers' turns" "paired key blocks"; do
  tag=$(echo $c | tr -c 'a-z0-9' '_' | cut -c1-40)
  timeout 60 $B attention --backward --selftest --cases "$c" > $R/selftest-$tag.txt 2>&1
  echo "selftest [$c] rc=$? $(grep -c '^PASS' $R/selftest-$tag.txt) pass $(grep -c '^FAIL' $R/selftest-$tag.txt) fail"
done
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [64x64] paired block-sparse x5" "paired block-sparse, the consumers' turns" "paired random 50% odd 11 key blocks"; do
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
