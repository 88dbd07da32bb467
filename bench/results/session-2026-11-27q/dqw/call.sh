#!/usr/bin/env bash
# GPU machine, carry .carry/s17 (base: HEAD's binary; dqw: the dQ writer warp by default).
#   bash call.sh check   -> backward selftest + memcheck/racecheck/synccheck of dqw, then the A/B
#   bash call.sh ab2     -> A/B part 2
# Interleaved A/B (run.py --ab --interleave), ABBA pairs per row; rows whose kernel the writer
# does not change (head dim 64's wide step, the 64-token tile) are the controls.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export FRAGMASK_CACHE_DIR=/tmp/s17-cache
fm=.carry/s17/dqw/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
ab() {  # ab NAME PAIRS REGEX
  timeout 560 python3 bench/suite/run.py --ab .carry/s17/base .carry/s17/dqw --interleave --rounds "$2" \
    --only "$3" --out $OUT/ab-$1 2>&1 | grep "^|"
}
case ${1:-check} in
  check)
    timeout 200 $fm attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? $(tail -1 $OUT/selftest.txt)"
    grep -i "writer\|fail" $OUT/selftest.txt | head -8
    for c in "--random 1,4,2,300,300,128 --causal" "--random 1,2,2,512,400,128 --synthetic-mask random:0.5" "--random 1,2,2,130,400,128 --window 40,0" "--random 1,2,2,256,320,64 --block 64x64 --synthetic-mask random:0.5"; do
      for t in memcheck racecheck synccheck; do
        timeout 60 compute-sanitizer --tool $t --error-exitcode 99 $fm attention $c --backward > /tmp/san.txt 2>&1
        echo "$t rc=$? [$c] $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' /tmp/san.txt | tail -1)" | tee -a $OUT/sanitizers.txt
      done
    done
    ab 1 3 '^bwd\.(s16384\.(none|causal)|s8192\.none|gqa\.s16384\.causal)$'
    ab 2 3 '^bwd\.(s16384\.(window1024|docs12|random50)|d64\.s16384\.causal|wu002\.blocks10)$'
    ;;
  ab2)
    ab 2 3 '^bwd\.(s16384\.(window1024|docs12|random50)|d64\.s16384\.causal|wu002\.blocks10)$'
    ;;
esac
