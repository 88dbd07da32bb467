#!/usr/bin/env bash
# One device call for decode's shared-K/V CTAs, masked D = 256, per-head masks with GQA
# and masks / top-k from Python (issue 11, third part). Three correctness branches run
# side by side (no timing in them):
#   A: `fragmask decode --sweep --graph` (the unmasked sweep, now with shared-K/V and
#      masked cases) and the masked / varlen / top-k CLI checks of decode2_gpu_run.sh
#   B: compute-sanitizer memcheck / racecheck / synccheck on the sweep's masked and
#      shared-K/V cases (every new kernel variant) and a masked varlen call
#   C: the Python op's GPU tests (test_gpu.DecodeTests)
# then, alone on the GPU: `fragmask bench decode --preset writeup002` and `--preset
# issue11` (copy roof in each run), bench/decode_mask_bench.py (FlexAttention, SDPA and
# fragmask side by side; SIDE=0 skips it) and bench/decode_eager_bench.py. Logs under
# $OUT (at most 8 files).
# CARRY: a folder holding fragmask, nvrtc-cache/, the scripts, the wheel and test_gpu.py.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
REPO=$PWD
CARRY=${CARRY:-.carry-decode}
FM=$REPO/$CARRY/fragmask
OUT=${OUT:-/tmp/out}
T=/tmp/d3
mkdir -p "$OUT" $T /tmp/fm-cache
[ -d "$CARRY/nvrtc-cache" ] && cp -r "$CARRY/nvrtc-cache/." /tmp/fm-cache/
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/device.txt"
pack() { $FM pack -q "$@" || echo "FAIL: pack $*"; }
pack --predicate 'window=300:0 | !(window=1000:1000)' --seqlen-q 64 --seqlen-k 2048 --block 64x64 --warpgroups 1 -o $T/m64.st
pack --predicate 'window=500:3' --seqlen-q 16 --seqlen-k 3000 --block 64x64 --warpgroups 1 -o $T/q16.st
pack --predicate '!(window=200:200)' --seqlen-q 64 --seqlen-k 2500 --block 128x128 --warpgroups 2 -o $T/m128.st
pack --predicate 'window=40:0' --seqlen-q 8 --seqlen-k 300 --block 64x64 --warpgroups 1 -o $T/small.st
pack --predicate 'window=90:7' --seqlen-q 64 --seqlen-k 1000 --block 64x64 --warpgroups 1 -o $T/m1000.st
pack --predicate 'window=100:0' --seqlen-q 64 --seqlen-k 300 --block 64x64 --warpgroups 1 -o $T/v300.st

branch_a() {
  echo "== fragmask decode --sweep --graph"
  timeout 200 $FM decode --sweep --graph
  echo "== masked decode (CLI) against the CPU f64 reference"
  $FM decode --random 2,64,12,12,2048,128 --mask $T/m64.st
  $FM decode --random 3,16,32,8,3000,128 --mask $T/q16.st --lengths 3000,0,1777
  $FM decode --random 2,64,8,2,2500,64 --page-size 16 --shuffle-pages --mask $T/m128.st --dtype f16
  $FM decode --random 2,64,12,12,1000,128 --page-size 1 --shuffle-pages --causal --mask $T/m1000.st --splits 5
  $FM decode --random 2,64,12,12,1000,128 --mask $T/m1000.st --splits 1 --lengths full
  $FM decode --random 2,64,12,12,1000,128 --mask $T/m1000.st --splits 64 --page-size 64 --shuffle-pages
  $FM decode --random 2,8,24,3,300,64 --mask $T/small.st --page-size 256
  $FM decode --random 2,64,12,12,1000,256 --mask $T/m1000.st --causal
  $FM decode --random 2,8,16,2,300,256 --mask $T/small.st --page-size 16 --shuffle-pages
  echo "== top-k decode (gather)"
  $FM decode --random 4,1,32,8,8192,128 --topk 512
  $FM decode --random 3,2,16,2,4096,64 --topk 300 --dtype f16 --splits 3
  echo "== variable query lengths (cu_seqlens_q), one CUDA graph replayed"
  $FM decode --random 4,33,32,8,2000,128 --seqlens-q 33,1,0,17 --causal
  $FM decode --random 3,64,12,12,1000,128 --seqlens-q random --mask $T/m1000.st --page-size 16 --shuffle-pages --splits 4
  $FM decode --random 5,7,8,1,500,64 --seqlens-q random --window-left 50 --causal --page-size 1 --dtype f16
}

branch_b() {
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool: sweep cases 'mask 64x64', 'mask 64x128', 'mask 128x128', 'shared K/V D=', varlen masked"
    for sel in "mask 64x64" "mask 64x128" "mask 128x128" "shared K/V D="; do
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --sweep --sweep-only "$sel" 2>&1 | grep -E "SUMMARY|sweep:|FAIL"
    done
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --random 2,64,4,4,300,128 --seqlens-q 64,17 --mask $T/v300.st --splits 3 --causal 2>&1 | grep -E "ERROR SUMMARY|FAIL"
  done
  echo "== compute-sanitizer --tool memcheck: the 64x16 case (lists past the staged entries)"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $FM decode --sweep --sweep-only "mask 64x16" 2>&1 | grep -E "SUMMARY|sweep:|FAIL"
}

branch_c() {
  rm -rf /tmp/wheel && mkdir -p /tmp/wheel && python3 -m zipfile -e $REPO/$CARRY/fragmask-0.1.0-cp38-abi3-manylinux_2_34_x86_64.whl /tmp/wheel
  cd $REPO/$CARRY && PYTHONPATH=/tmp/wheel PYTHONUNBUFFERED=1 timeout 200 python3 -m unittest -v test_gpu.DecodeTests 2>&1 | tail -40
}

branch_a > "$OUT/a_check.log" 2>&1 &
A=$!
branch_b > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
branch_c > "$OUT/c_python.log" 2>&1 &
C=$!
wait $A $B $C
fail=0
grep -q "FAIL\|ERROR SUMMARY: [1-9]\|^error\|panicked" "$OUT/a_check.log" "$OUT/b_sanitizers.log" && fail=1
grep -q "^OK" "$OUT/c_python.log" || fail=1
echo "== bench (alone on the GPU)"
{
  $FM bench decode --preset writeup002 --iters 50
  $FM bench decode --preset issue11 --iters 30
} > "$OUT/bench.txt" 2>&1
if [ "${SIDE:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 timeout ${SIDE_TIMEOUT:-170} python3 $CARRY/decode_mask_bench.py --fragmask $FM --json "$OUT/side.json" > "$OUT/side.log" 2>&1
fi
PYTHONPATH=/tmp/wheel PYTHONUNBUFFERED=1 timeout 60 python3 $CARRY/decode_eager_bench.py >> "$OUT/bench.txt" 2>&1
# Short table last.
grep -E "sweep:|PASS|FAIL" "$OUT/a_check.log" | grep -v PASS | tail -5
echo "A: $(grep -c PASS "$OUT/a_check.log") PASS lines, $(grep -c FAIL "$OUT/a_check.log") FAIL"
echo "B: $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/b_sanitizers.log") clean / $(grep -c 'ERROR SUMMARY' "$OUT/b_sanitizers.log") sanitizer runs; $(grep 'sweep:' "$OUT/b_sanitizers.log" | grep -vc ' 0 failed') sweeps with failures"
tail -4 "$OUT/c_python.log"
grep -E "^device|002|B=16 H=32/8 Sk=8192 \||B=1 H|B=64|B=8 H|paged 16" "$OUT/bench.txt" | cut -c1-200
grep -E "^fragmask.decode|us per|ms \|" "$OUT/bench.txt"
[ -f "$OUT/side.log" ] && sed -n '/^masked \/ top-k decode/,$p' "$OUT/side.log" | cut -c1-130
echo "checks: $([ $fail = 0 ] && echo all passed || echo FAILED)"
