#!/usr/bin/env bash
# For the next device session: branch h/kv-prefetch (5d360e8: the next wave's K/V prefetched into
# L2 three steps before a window walk ends) against main's kernels (ad60bfd's binary).
# DIR=k46a: fm_main.xz / COMMIT_main, fm_pf.xz / COMMIT_pf (rebuild from the branch if the
# folder is gone: strip + xz -T2 -6, as docs/PERF.md's device notes say).
# 1. guard; 2. the window selftest cases and the sanitizers on two of them; 3. A/B, 3 ABBA pairs,
# on the window rows (changed) and two controls (documents: the documents grid; GQA: 2 slices).
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; fm_unxz $K/fm_pf.xz pf "$(cat $K/COMMIT_pf)"
M=/tmp/main/fragmask; B=/tmp/pf/fragmask; S=bench/results/session-2026-11-29k   # binab.py
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $B attention --backward --selftest --cases "window 300:0 700 d128" > $R/guard.txt 2>&1; rc=$?
echo "guard rc=$rc"; tail -c 200 $R/guard.txt; [ $rc -eq 0 ] || exit 1
timeout 90 $B attention --backward --selftest --cases "window" > $R/selftest-window.txt 2>&1
echo "selftest window rc=$? $(grep -c '^PASS' $R/selftest-window.txt) pass $(grep -c '^FAIL' $R/selftest-window.txt) fail"
for tool in memcheck racecheck synccheck; do
  for c in "window 100:40 offset 30, 450x500 d128" "none odd 200x317 d128"; do
    tag=$(echo $c | tr -c 'a-z0-9' '_' | cut -c1-24)
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
timeout 300 python3 $S/binab.py $M $B '^bwd[.](s16384[.](none|causal|window1024|docs12)|s8192[.](none|causal)|s4096[.](none|causal)|gqa[.]s16384[.]causal)$' 3 "" > $R/ab.txt 2>&1; echo "ab rc=$?"
cut -c1-120 $R/ab.txt
