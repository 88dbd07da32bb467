#!/usr/bin/env bash
# One device call for masked / top-k / variable-length decode and the Python op (issue
# 11, second part). Three correctness branches run side by side (no timing in them):
#   A: `fragmask decode` against the CPU f64 reference (block-sparse masks, top-k
#      gathers, cu_seqlens_q launched and replayed from one CUDA graph, the unmasked sweep)
#   B: compute-sanitizer memcheck / racecheck / synccheck on small masked, top-k and
#      varlen shapes
#   C: the Python op's GPU tests (fragmask.decode against SDPA, graphs, compile, opcheck)
# then, alone on the GPU, the side-by-side benchmark (bench/decode_mask_bench.py:
# FlexAttention, SDPA, fragmask). Logs under $OUT.
# CARRY: a folder holding fragmask, decode_mask_bench.py, the wheel and test_gpu.py.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
REPO=$PWD
CARRY=${CARRY:-.carry-decode2}
FM=$CARRY/fragmask
OUT=${OUT:-/tmp/out}
T=/tmp/d2
mkdir -p "$OUT" $T
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
pack() { $FM pack -q "$@" || echo "FAIL: pack $*"; }
pack --predicate 'window=300:0 | !(window=1000:1000)' --seqlen-q 64 --seqlen-k 2048 --block 64x64 --warpgroups 1 -o $T/m64.st
pack --predicate 'window=500:3' --seqlen-q 16 --seqlen-k 3000 --block 64x64 --warpgroups 1 -o $T/q16.st
pack --predicate '!(window=200:200)' --seqlen-q 64 --seqlen-k 2500 --block 128x128 --warpgroups 2 -o $T/m128.st
pack --predicate 'window=40:0' --seqlen-q 8 --seqlen-k 300 --block 64x64 --warpgroups 1 -o $T/small.st
pack --predicate 'window=90:7' --seqlen-q 64 --seqlen-k 1000 --block 64x64 --warpgroups 1 -o $T/m1000.st

branch_a() {
  export FRAGMASK_CACHE_DIR=/tmp/fm-cache-a
  echo "== masked decode against the CPU f64 reference"
  $FM decode --random 2,64,12,12,2048,128 --mask $T/m64.st
  $FM decode --random 3,16,32,8,3000,128 --mask $T/q16.st --lengths 3000,0,1777
  $FM decode --random 2,64,8,2,2500,64 --page-size 16 --shuffle-pages --mask $T/m128.st --dtype f16
  $FM decode --random 2,64,12,12,1000,128 --page-size 1 --shuffle-pages --causal --mask $T/m1000.st --splits 5
  $FM decode --random 2,64,12,12,1000,128 --mask $T/m1000.st --splits 1 --lengths full
  $FM decode --random 2,64,12,12,1000,128 --mask $T/m1000.st --splits 64 --page-size 64 --shuffle-pages
  $FM decode --random 2,8,24,3,300,64 --mask $T/small.st --page-size 256
  echo "== top-k decode (gather) against the CPU f64 reference"
  $FM decode --random 4,1,32,8,8192,128 --topk 512
  $FM decode --random 3,2,16,2,4096,64 --topk 300 --dtype f16 --splits 3
  $FM decode --random 2,1,8,8,1000,128 --topk 1
  echo "== variable query lengths (cu_seqlens_q), launched and replayed from one CUDA graph"
  $FM decode --random 4,33,32,8,2000,128 --seqlens-q 33,1,0,17 --causal
  $FM decode --random 3,64,12,12,1000,128 --seqlens-q random --mask $T/m1000.st --page-size 16 --shuffle-pages --splits 4
  $FM decode --random 5,7,8,1,500,64 --seqlens-q random --window-left 50 --causal --page-size 1 --dtype f16
  echo "== unmasked sweep (regression of the shared kernel)"
  timeout 60 $FM decode --sweep | tail -3
}

branch_b() {
  export FRAGMASK_CACHE_DIR=/tmp/fm-cache-b
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool: masked paged 16 causal 3 splits; top-k 2 splits; varlen 3 splits"
    compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --random 2,8,8,2,300,64 --page-size 16 --shuffle-pages --causal --mask $T/small.st --splits 3 2>&1 | tail -2
    compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --random 2,1,8,2,300,128 --topk 40 --splits 2 2>&1 | tail -2
    compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --random 3,5,8,2,300,64 --seqlens-q 5,0,3 --causal --splits 3 2>&1 | tail -2
  done
}

branch_c() {
  export FRAGMASK_CACHE_DIR=/tmp/fm-cache-c
  rm -rf /tmp/wheel && mkdir -p /tmp/wheel && python3 -m zipfile -e $REPO/$CARRY/fragmask-0.1.0-cp38-abi3-manylinux_2_34_x86_64.whl /tmp/wheel
  cd $CARRY && PYTHONPATH=/tmp/wheel PYTHONUNBUFFERED=1 timeout 150 python3 -m unittest -v test_gpu.DecodeTests 2>&1 | tail -60
}

branch_a > "$OUT/a_check.log" 2>&1 &
A=$!
branch_b > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
branch_c > "$OUT/c_python.log" 2>&1 &
C=$!
wait $A $B $C
fail=0
grep -E "PASS|FAIL|ERROR SUMMARY|passed|failed|error" "$OUT/a_check.log" | cut -c1-230
grep -E "==|ERROR SUMMARY" "$OUT/b_sanitizers.log"
tail -6 "$OUT/c_python.log"
grep -q "FAIL\|ERROR SUMMARY: [1-9]\|^error" "$OUT/a_check.log" "$OUT/b_sanitizers.log" && fail=1
grep -q "^OK" "$OUT/c_python.log" || fail=1
[ "$(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/b_sanitizers.log")" = 9 ] || fail=1
echo "== side by side"
export FRAGMASK_CACHE_DIR=/tmp/fm-cache-a
PYTHONUNBUFFERED=1 timeout ${SIDE_TIMEOUT:-150} python3 $CARRY/decode_mask_bench.py --fragmask $FM --json "$OUT/decode2_side.json" ${SIDE_ARGS:-} > "$OUT/decode2_side.log" 2>&1
grep -v '^{' "$OUT/decode2_side.log" | grep -v "^$" | tail -30
echo "checks: $([ $fail = 0 ] && echo all passed || echo FAILED)"
