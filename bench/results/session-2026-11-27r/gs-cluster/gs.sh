#!/usr/bin/env bash
# GQA group slices: timing per slice count, backward selftest, sanitizers on sliced calls.
set -uo pipefail
source bench/suite/device_env.sh
new=${NEW:-.carry/gs/fragmask}
mkdir -p $OUT/gs
ms() { python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(round(d['ms_median'],4), d['kernel'])" 2>&1 | tail -1; }
{
for round in 1 2; do
for cfg in 1,64,8 1,32,8 2,32,8; do
  for g in 1 2 4 8; do
    echo "round=$round cfg=$cfg slices=$g ms=$($new bench backward --random $cfg,16384,16384,128 --causal --group-slices $g --iters 10 --warmup 3 --json 2>&1 | ms)"
  done
done
done
echo "mha16 ms=$($new bench backward --random 1,16,16,16384,16384,128 --causal --iters 10 --warmup 3 --json 2>&1 | ms)"
echo "gqa none 32:8 slices1 ms=$($new bench backward --random 1,32,8,16384,16384,128 --group-slices 1 --iters 10 --warmup 3 --json 2>&1 | ms)"
echo "gqa none 32:8 slices4 ms=$($new bench backward --random 1,32,8,16384,16384,128 --group-slices 4 --iters 10 --warmup 3 --json 2>&1 | ms)"
} 2>&1 | tee $OUT/gs/timing.txt
timeout ${SELFTEST_S:-200} $new attention --selftest --backward > $OUT/gs/selftest.txt 2>&1; echo "selftest rc=$?"; grep -i -E "fail|group slices|summary|passed" $OUT/gs/selftest.txt | tail -12
for tool in memcheck racecheck synccheck; do
  for args in "--random 2,8,2,600,600,128 --backward --causal --group-slices 4" "--random 1,16,2,300,420,128 --backward --causal --diag-offset 120 --group-slices 8"; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 $new attention $args > $OUT/gs/san.txt 2>&1
    echo "$tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/gs/san.txt | tail -1) :: $args"
  done
done
