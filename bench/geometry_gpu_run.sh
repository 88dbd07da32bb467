#!/bin/bash
# One device call for the tile geometries (issue 15): selftest over every geometry, sanitizers on
# the new tiles, write-up 002's prefill (bench/video_bench.py) and the head-dim table
# (bench/geometry_bench.py). Usage on the GPU machine (repo root, binary in .carry/):
#   STEPS=selftest,sanitize,video,geometry bash bench/geometry_gpu_run.sh
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FRAGMASK_CACHE_DIR=${FRAGMASK_CACHE_DIR:-/tmp/fragmask_cache}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fragmask_out}; mkdir -p "$OUT"
BIN=.carry/fragmask
STEPS=${STEPS:-selftest,sanitize,video,geometry}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
if [[ $STEPS == *selftest* ]]; then
  timeout 300 $BIN attention --selftest ${SELFTEST_FLAGS:-} > "$OUT/selftest.txt" 2>&1; rc=$?
  echo "selftest rc=$rc: $(grep -c ^PASS "$OUT/selftest.txt") pass, $(grep -c ^FAIL "$OUT/selftest.txt") fail"
  grep ^FAIL "$OUT/selftest.txt" | cut -c1-200 | head -12
fi
if [[ $STEPS == *sanitize* ]]; then
  for tool in memcheck racecheck synccheck; do
    for m in "--block 64x64 --synthetic-mask random:0.3" "--block 64x64 --causal" "--block 128x80 --synthetic-mask random:0.3" "--synthetic-mask random:0.3"; do
      d=128; [[ $m == *128x80* ]] && d=256
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $BIN attention --random 1,2,1,300,260,$d $m \
        > "$OUT/san.log" 2>&1; echo "$tool [$m d$d] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK' "$OUT/san.log" | tail -1)"
    done
  done
fi
if [[ $STEPS == *video* ]]; then
  timeout 420 python3 bench/video_bench.py --bin $BIN --out "$OUT" ${VIDEO_FLAGS:-} > "$OUT/video.txt" 2>&1
  echo "video rc=$?"; grep -v '^{' "$OUT/video.txt" | tail -16
fi
if [[ $STEPS == *geometry* ]]; then
  timeout 300 python3 bench/geometry_bench.py --bin $BIN --out "$OUT" ${GEOMETRY_FLAGS:-} > "$OUT/geometry.txt" 2>&1
  echo "geometry rc=$?"; grep -v '^{' "$OUT/geometry.txt" | tail -16
fi
