#!/bin/bash
# Device call 6: decode's combine issues 24 partials' loads together (was 8; one round for the planner's
# 18-22 splits). New .carry/fragmask_cb vs .carry/fragmask_pp (LOAD_BATCH 8): decode sweep and sanitizers on
# the new one; interleaved A/B of the write-up 002 and issue-11 presets; ncu of the combine in both.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
A=$PWD/.carry/fragmask_pp; B=$PWD/.carry/fragmask_cb
timeout 120 $B decode --sweep --graph > $OUT/decode_sweep_cb.txt 2>&1; echo "decode sweep (new) rc=$? $(tail -1 $OUT/decode_sweep_cb.txt) t=$SECONDS"
for s in "mask 64x64" "shared K/V D="; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B decode --sweep --sweep-only "$s" 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY" | tail -1)
    echo "$tool | $s | $r"
  done
done | tee $OUT/sanitizers_cb.txt; echo "t=$SECONDS"
for round in 1 2; do
  for bin in $A $B; do
    echo "== writeup002 round $round $(basename $bin)"
    timeout 90 $bin bench decode --preset writeup002 --iters 50 2>&1 | grep -E "^\| 002" | cut -d'|' -f2,10,12,14,15,16
  done
done | tee $OUT/ab_writeup002.txt
for bin in $A $B; do
  echo "== issue11 $(basename $bin)"
  timeout 120 $bin bench decode --preset issue11 --iters 30 2>&1 | grep -E "^\| B=" | cut -d'|' -f2,10,12,14,15,16
done | tee $OUT/ab_issue11.txt
for bin in $A $B; do
  timeout 90 ncu --clock-control none -k regex:combine --metrics gpu__time_duration.sum --launch-skip 2 --launch-count 6 \
    $bin bench decode --preset writeup002 --warmup 1 --iters 2 2>&1 | grep -E "duration" | sed "s#^#$(basename $bin): #"
done | tee $OUT/ncu_combine.txt
