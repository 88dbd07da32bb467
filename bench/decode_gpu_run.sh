#!/usr/bin/env bash
# One device call for split-KV decode (issue 11): the correctness sweep against the CPU
# f64 reference (with CUDA-graph replays at other lengths), compute-sanitizer memcheck /
# racecheck / synccheck on small shapes, then the side-by-side benchmark (torch SDPA,
# FlexAttention, fragmask) with fragmask checked against SDPA on files. Logs under $OUT.
# CARRY: a folder holding fragmask, decode_bench.py and optionally nvrtc-cache/.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
CARRY=${CARRY:-.carry-decode}
FM=$CARRY/fragmask
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/fm-cache
[ -d "$CARRY/nvrtc-cache" ] && cp -r "$CARRY/nvrtc-cache/." /tmp/fm-cache/
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
fail=0
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  echo "== fragmask decode --sweep --graph"
  time $FM decode --sweep --graph || fail=1
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer --tool $tool (paged 16 shuffled, causal Sq=3, 3 splits; contiguous D=128 1 split)"
    compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --random 2,3,8,2,200,64 --page-size 16 --shuffle-pages --causal --splits 3 2>&1 | tail -3 || fail=1
    compute-sanitizer --tool $tool --error-exitcode 9 $FM decode --random 2,1,32,8,300,128 --splits 1 2>&1 | tail -3 || fail=1
  done
} 2>&1 | tee "$OUT/decode_check.log"
grep -q "FAIL\|ERROR SUMMARY: [1-9]" "$OUT/decode_check.log" && fail=1
echo "== side by side (fragmask bench decode --preset issue11 inside)"
PYTHONUNBUFFERED=1 timeout ${SIDE_TIMEOUT:-200} python3 $CARRY/decode_bench.py --fragmask $FM --json "$OUT/decode_side.json" ${SIDE_ARGS:-} 2>&1 | tee "$OUT/decode_side.log" | grep -v "^$"
if [ "${SPLIT_SCAN:-0}" = 1 ]; then
  echo "== split scan (B=16 Sk=8192; B=1 Sk=65536; B=8 H=64 Sk=16384)"
  for s in 1 2 4 8; do $FM bench decode --splits $s --iters 30 | tail -1; done
  for s in 16 33 66 132; do $FM bench decode --batch 1 --seqlen-k 65536 --splits $s --iters 30 | tail -1; done
  for s in 2 4 8 16; do $FM bench decode --batch 8 --heads 64 --seqlen-k 16384 --splits $s --iters 30 | tail -1; done
fi
echo "checks: $([ $fail = 0 ] && echo all passed || echo FAILED)"
