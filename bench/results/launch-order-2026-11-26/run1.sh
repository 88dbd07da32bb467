#!/usr/bin/env bash
# gqa helper, GPU run 1 (1xH100): selftest (new launch-order cases), sanitizers on the sectioned grid and table,
# then interleaved timing of launch-order variants (plan1.json, abn.py) against main's 59d581c binary.
# Binary: f67ceaf (launch order by --head-section; default sections for every causal window call).
set -u
C=.carry/gqa
source bench/suite/device_env.sh
R=/tmp/gqa_r1; mkdir -p $R
xz -dc $C/fragmask.xz > /tmp/gqa_new && chmod +x /tmp/gqa_new
xz -dc .carry/s12/final/fragmask.xz > /tmp/gqa_main && chmod +x /tmp/gqa_main
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee $R/device.txt
T0=$(date +%s)
timeout 75 /tmp/gqa_new attention --selftest --block 128x128 > $R/selftest_128.txt 2>&1; echo "selftest rc=$?" | tee -a $R/rc.txt
echo "selftest: $(grep -c '^PASS' $R/selftest_128.txt) PASS; $(tail -1 $R/selftest_128.txt)"; grep -i "^FAIL\|section" $R/selftest_128.txt | head -12
for tool in memcheck racecheck synccheck; do
  for c in "2,6,3,400,400,128 --causal --head-section 5" "2,6,3,500,500,128 --causal --head-section 5 --persistent on --persistent-ctas 3"; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/gqa_new attention --random $c > $R/san.txt 2>&1; rc=$?
    echo "$tool [$c] rc=$rc $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san.txt | tail -1)" | tee -a $R/rc.txt
  done
done
echo "checks took $(( $(date +%s) - T0 )) s"
left=$(( 225 - ($(date +%s) - T0) ))
python3 $C/abn.py $C/plan1.json $left 2>&1 | tee $R/abn.txt
cp -r $R $OUT/ 2>/dev/null
echo done
