#!/usr/bin/env bash
# Branches h/det-release-early-2 (RE) and h/det-writer-1wg-2 (1WG), each one commit on main
# (b22cc46): hang guards, the deterministic selftest and sanitizers, then A/Bs against main.
# Everything written under $OUT/r and tarred (a call brings back 8 files at most).
source bench/suite/device_env.sh
K=.carry/k43b; R=$OUT/r; mkdir -p $R
for n in main re 1wg; do fm_unxz $K/fm_$n.xz $n "$(cat $K/COMMIT_$n)"; done
M=/tmp/main/fragmask; RE=/tmp/re/fragmask; W=/tmp/1wg/fragmask
S=bench/results/session-2026-11-29k
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 40 $RE bench backward --random 1,16,16,16384,16384,128 --deterministic --synthetic-mask blocksparse:0.1:0.5 --json --warmup 2 --iters 5 > $R/guard-re.txt 2>&1; rc=$?; echo "guard re rc=$rc"; [ $rc -eq 0 ] || exit 1
timeout 40 $W bench backward --random 1,12,12,4096,4096,128 --deterministic --synthetic-mask blocksparse:0.1:0.5 --json --warmup 2 --iters 5 > $R/guard-1wg.txt 2>&1; echo "guard 1wg (128x128) rc=$?"
timeout 40 $W attention --backward --selftest --cases "deterministic [64x64]" > $R/selftest-1wg-64.txt 2>&1; rc=$?; echo "1wg selftest 64x64 rc=$rc $(grep -c '^PASS' $R/selftest-1wg-64.txt) pass"; grep "^FAIL" $R/selftest-1wg-64.txt | head -3
timeout 120 $RE attention --backward --selftest --cases "deterministic" > $R/selftest-re.txt 2>&1; echo "re selftest rc=$? $(grep -c '^PASS' $R/selftest-re.txt) pass"; grep "^FAIL" $R/selftest-re.txt | head -3
for tool in memcheck racecheck synccheck; do
  for bc in "re|deterministic [128x128] block-sparse 3 heads" "re|deterministic no mask gqa 2" "1wg|deterministic [64x64] block-sparse x5 d128" "1wg|deterministic [64x64] random 50% x5 d64"; do
    b=${bc%%|*}; c=${bc#*|}; tag=$b-$(echo $c | cut -c15-40 | tr -c 'a-z0-9' '_')
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/$b/fragmask attention --backward --selftest --cases "$c" > $R/san-$tool-$tag.txt 2>&1
    echo "$tool $b [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$tool-$tag.txt | tail -1)"
  done
done
timeout 100 python3 $S/binab.py $M $W 'bwd[.]wu002[.]blocks(10|50)$' 2 "--deterministic" > $R/ab-1wg.txt 2>&1; echo "ab 1wg rc=$?"
timeout 230 python3 bench/results/session-2026-11-29i/detab.py $M $RE $R/detab-re.jsonl 2 > $R/detab-re.txt 2>$R/detab-re.err; echo "detab re rc=$?"; head -c 600 $R/detab-re.err
cat $R/ab-1wg.txt | cut -c1-150; cat $R/detab-re.txt
