#!/usr/bin/env bash
# One device call for the lean key loop (issue 11, write-up 002's decode) and write-up
# 002's backward against FlexAttention (issue 13). Needs .carry/ from
# bench/decode5_prepare.sh: cl/fragmask (main), lean/fragmask (LEAN_LOOP on), cache/.
# Correctness of the lean binary first (sweep with graph replays, sanitizers), then alone
# on the GPU: both binaries on the writeup002 and issue11 presets, interleaved, then
# bench/decode_mask_bench.py --quick (Flex, SDPA) with each, then the backward's video10
# workload (FlexAttention falls back to a 128-token BlockMask + mask_mod when no 64-token
# backward compiles). Logs under $OUT, progressively.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
C=${CARRY:-.carry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/fm-cache
cp -r "$C/cache/." /tmp/fm-cache/
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
CL=$C/cl/fragmask
LEAN=$C/lean/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/device.txt"
SECONDS=0

timeout 150 "$LEAN" decode --sweep --graph > "$OUT/a_sweep.log" 2>&1 &
A=$!
san() {
  echo "== compute-sanitizer --tool $1: --sweep-only '$2'"
  timeout 120 compute-sanitizer --tool "$1" --error-exitcode 9 "$LEAN" decode --sweep --sweep-only "$2" 2>&1 \
    | grep -E "SUMMARY|sweep:|FAIL|rror" | head -12
  echo "rc=${PIPESTATUS[0]}"
}
{ san memcheck "shared K/V"; san racecheck "shared K/V, 16 splits"; san memcheck "GQA"; } > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
{ san synccheck "shared K/V"; san racecheck "mask 64x64 x16"; san synccheck "causal"; } > "$OUT/c_sanitizers.log" 2>&1 &
S=$!
wait $A $B $S
echo "correctness done t=${SECONDS}s"

b() { echo "== $* (t=${SECONDS}s)"; "$@" 2>&1; }
{
  for round in 1 2; do
    b "$CL" bench decode --preset writeup002 --iters 50
    b "$LEAN" bench decode --preset writeup002 --iters 50
  done
  b "$CL" bench decode --preset issue11 --iters 30
  b "$LEAN" bench decode --preset issue11 --iters 30
} >> "$OUT/bench.txt"
echo "bench done t=${SECONDS}s"
for bin in "$CL" "$LEAN"; do
  PYTHONUNBUFFERED=1 timeout 120 python3 bench/decode_mask_bench.py --fragmask "$bin" --quick \
    > "$OUT/side_$(basename "$(dirname "$bin")").log" 2>&1
done
echo "side done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 330 python3 bench/backward_bench.py --bin "$CL" --out "$OUT" --workdir /tmp/fm_bwd \
  --iters 20 --only video10 > "$OUT/video10.txt" 2>&1
echo "video10 done t=${SECONDS}s rc=$?"

# Short table last.
grep -E "sweep:|FAIL|rror|panicked" "$OUT/a_sweep.log" | tail -6
grep -hE "SUMMARY|sweep:|rc=" "$OUT/b_sanitizers.log" "$OUT/c_sanitizers.log"
grep -E "^== |002 " "$OUT/bench.txt" | sed -E 's/ \| 1 \| 64 \| 12 \| 12 \| 23296 \| 128//' | cut -c1-150
grep -E "B=16 H=32/8 Sk=8192 \||B=1 H|B=64|B=8 H|paged 16" "$OUT/bench.txt" | cut -c1-160
for f in "$OUT"/side_*.log; do echo "== $f"; sed -n '/^masked \/ top-k decode/,$p' "$f" | cut -c1-130; done
tail -8 "$OUT/video10.txt" | cut -c1-400
