#!/usr/bin/env bash
# One device call for the split-KV wgmma forward (issue 11, write-up 002's decode). Needs
# .carry/ from bench/split7_prepare.sh. Correctness first (the forward's selftest, whose
# sweep has split-KV cases on every geometry; compute-sanitizer on a split call; write-up
# 002's shape against fp32 torch), then alone on the GPU: `bench decode --preset
# writeup002` (the mma.sync decode rows, then the forward at a range of split counts).
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
FM=$C/main/fragmask
SECONDS=0
timeout 300 "$FM" attention --selftest > "$OUT/a_selftest.log" 2>&1 &
A=$!
san() {  # TOOL "ARGS" (split into words)
  # shellcheck disable=SC2086
  fm_sanitize "$1" "$FM" attention $2
}
{
  for tool in memcheck racecheck synccheck; do
    san $tool "--random 1,3,3,64,3000,128 --synthetic-mask random:0.1 --block 64x64 --splits 5"
    san $tool "--random 1,2,1,100,2000,128 --causal --diag-offset 1900 --splits 7"
  done
} > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
wait $A $B
echo "correctness done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 200 python3 bench/split_forward_check.py --fragmask "$FM" --splits 1,16,22 > "$OUT/c_torch_check.log" 2>&1
echo "torch check done t=${SECONDS}s"
"$FM" bench decode --preset writeup002 --iters 50 > "$OUT/bench.txt" 2>&1
echo "bench done t=${SECONDS}s"

grep -E "passed|failed|FAIL" "$OUT/a_selftest.log" | tail -12
grep -E "SUMMARY|rc=|==" "$OUT/b_sanitizers.log"
cat "$OUT/c_torch_check.log" | tail -8
grep -E "^\| 002|wgmma" "$OUT/bench.txt" | grep -v head-major | sed -E 's/ \| 1 \| 64 \| 12 \| 12 \| 23296 \| 128//' | cut -c1-140
