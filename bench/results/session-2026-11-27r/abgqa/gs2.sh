#!/usr/bin/env bash
# Group slices: red.global (gs-red) against TMA bulk (gs) epilogues, slices 1..8; then the bulk build's selftest and sanitizers.
set -uo pipefail
source bench/suite/device_env.sh
mkdir -p $OUT/gs
nvidia-smi --query-gpu=name --format=csv,noheader
ms() { python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(round(d['ms_median'],4), d['kernel'])" 2>&1 | tail -1; }
{
for round in 1 2; do
for cfg in 1,64,8 1,32,8 2,32,8; do
  for g in 1 2 4 8; do
    [ "$cfg" != "1,64,8" ] && [ $g = 8 ] && continue
    for bin in .carry/gs-red/fragmask .carry/gs/fragmask; do
      [ $g = 1 ] && [ $bin = .carry/gs-red/fragmask ] && continue
      echo "round=$round cfg=$cfg slices=$g bin=$bin ms=$($bin bench backward --random $cfg,16384,16384,128 --causal --group-slices $g --iters 10 --warmup 3 --json 2>&1 | ms)"
    done
  done
done
done
} 2>&1 | tee $OUT/gs/timing2.txt
new=.carry/gs/fragmask
timeout 200 $new attention --selftest --backward > $OUT/gs/selftest2.txt 2>&1; echo "selftest rc=$?"; grep -E "FAIL|group slices|failure" $OUT/gs/selftest2.txt | tail -8
for tool in memcheck racecheck synccheck; do
  for args in "--random 2,8,2,600,600,128 --backward --causal --group-slices 4" "--random 1,16,2,300,420,128 --backward --causal --diag-offset 120 --group-slices 8" "--random 1,4,2,500,500,64 --backward --causal --group-slices 2 --bwd-step 64"; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 $new attention $args > $OUT/gs/san.txt 2>&1
    echo "$tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/gs/san.txt | tail -1) :: $args"
  done
done
