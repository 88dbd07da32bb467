#!/usr/bin/env bash
# gqa helper, GPU run 2: the final build (2b607aa) against main's 59d581c: selftests of the geometries whose
# causal calls may take the new launch order, sanitizers on them, the suite's interleaved A/B (ABBA pairs),
# then SM clock / power samples of a long and a short causal call (power-cap check).
set -u
C=.carry/gqa
source bench/suite/device_env.sh
R=/tmp/gqa_r2; mkdir -p $R/A $R/B $R/ab1 $R/ab2
xz -dc .carry/s12/final/fragmask.xz > $R/A/fragmask && chmod +x $R/A/fragmask && echo 59d581c > $R/A/COMMIT
xz -dc $C/fragmask.xz > $R/B/fragmask && chmod +x $R/B/fragmask && cat $C/COMMIT > $R/B/COMMIT
B=$R/B/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee $R/device.txt
T0=$(date +%s)
for g in 192x128 128x80; do
  timeout 45 $B attention --selftest --block $g > $R/selftest_${g}.txt 2>&1; rc=$?
  echo "selftest $g rc=$rc $(grep -c '^PASS' $R/selftest_${g}.txt) PASS; $(tail -1 $R/selftest_${g}.txt)" | tee -a $R/rc.txt
  grep "^FAIL" $R/selftest_${g}.txt | head -5
done
for tool in memcheck racecheck; do
  for c in "2,6,3,600,600,64 --causal --head-section 5" "2,6,3,300,300,256 --causal --head-section 5" "1,16,16,1024,1024,128 --causal --head-section 16 --persistent on --persistent-ctas 7"; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --random $c > $R/san.txt 2>&1; rc=$?
    echo "$tool [$c] rc=$rc $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san.txt | tail -1)" | tee -a $R/rc.txt
  done
done
echo "checks took $(( $(date +%s) - T0 )) s"
rows1='^fwd\.(gqa|gqa64)\.s16384\.causal$|^fwd\.s(4096|8192|16384)\.causal$|^fwd\.d64\.s16384\.causal$'
rows2='^fwd\.s16384\.(none|window1024)$|^fwd\.d256\.s16384\.causal$|^fwd\.s4096\.none$'
left=$(( 140 - ($(date +%s) - T0) ))
timeout $((left + 20)) python3 bench/suite/run.py --ab $R/A $R/B --interleave --systems fragmask_cli --rounds 2 --only "$rows1" --budget-s $left --out $R/ab1 2>&1 | tail -25
left=$(( 200 - ($(date +%s) - T0) ))
timeout $((left + 20)) python3 bench/suite/run.py --ab $R/A $R/B --interleave --systems fragmask_cli --rounds 2 --only "$rows2" --budget-s $left --out $R/ab2 2>&1 | tail -16
# Clocks and power while a long call (GQA 64:8, 6.5 ms x 45) and a short one (H=16, 1.5 ms x 45) run.
for a in "1,64,8,16384,16384,128" "1,16,16,16384,16384,128"; do
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 20 > $R/clk.txt 2>/dev/null & S=$!
  $B bench attention --random $a --causal --json --warmup 5 --iters 40 | tail -1 | cut -c1-80
  kill $S 2>/dev/null; wait $S 2>/dev/null
  echo "[$a] clocks MHz / W (samples): $(awk -F', ' '{print $1"/"$2"/"$3}' $R/clk.txt | sed 's/ MHz//; s/ W//' | tr '\n' ' ' | cut -c1-600)"
done
cp -r $R/*.txt $R/ab1 $R/ab2 $OUT/ 2>/dev/null
echo "total $(( $(date +%s) - T0 )) s"
