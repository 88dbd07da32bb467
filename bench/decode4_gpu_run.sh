#!/usr/bin/env bash
# One device call for decode's cluster merge and head-major caches (issue 11, write-up
# 002's decode targets). Three binaries carried in $CARRY (default .carry):
#   cl/fragmask - the cluster merge (shared-K/V splits merged through distributed shared
#                 memory, 4 stages); the candidate
#   s4/fragmask - the same code before the cluster merge (workspace partials + combine)
#   c3/fragmask - cl with 3 shared-K/V stages (three CTAs per SM)
# and cache/ (their NVRTC cubins). Correctness first (the sweep with graph replays and
# compute-sanitizer on the shared-K/V cases, side by side, no timing), then alone on the
# GPU: the writeup002 preset (both cache orders) for the three binaries, split scans,
# the issue11 preset, and bench/decode_mask_bench.py --quick (FlexAttention and SDPA in
# the same run). Logs under $OUT, progressively, so a cut-off call still returns them.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
C=${CARRY:-.carry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/fm-cache
cp -r "$C/cache/." /tmp/fm-cache/
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
CL=$C/cl/fragmask
S4=$C/s4/fragmask
C3=$C/c3/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/device.txt"
SECONDS=0

timeout 110 "$CL" decode --sweep --graph > "$OUT/a_sweep.log" 2>&1 &
A=$!
san() {
  local tool=$1 sel=$2
  echo "== compute-sanitizer --tool $tool: --sweep-only '$sel'"
  timeout 100 compute-sanitizer --tool "$tool" --error-exitcode 9 "$CL" decode --sweep --sweep-only "$sel" 2>&1 \
    | grep -E "SUMMARY|sweep:|FAIL|rror" | head -12
  echo "rc=${PIPESTATUS[0]}"
}
{ san memcheck "shared K/V"; san racecheck "shared K/V, 16 splits"; } > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
{ san synccheck "shared K/V"; san racecheck "head-major, shared K/V"; } > "$OUT/c_sanitizers.log" 2>&1 &
S=$!
{ echo "== s4: --sweep-only head-major"; timeout 100 "$S4" decode --sweep --graph --sweep-only "head-major" 2>&1 | grep -E "sweep:|FAIL|rror"
  echo "== c3: --sweep-only 'shared K/V'"; timeout 100 "$C3" decode --sweep --graph --sweep-only "shared K/V" 2>&1 | grep -E "sweep:|FAIL|rror"
} > "$OUT/d_other.log" 2>&1 &
D=$!
wait $A $B $S $D
echo "correctness done t=${SECONDS}s"

b() { echo "== $* (t=${SECONDS}s)"; "$@" 2>&1; }
{
  b "$CL" bench decode --preset writeup002 --iters 50
  b "$S4" bench decode --preset writeup002 --iters 50
  b "$C3" bench decode --preset writeup002 --iters 50
  b "$CL" bench decode --preset writeup002 --iters 30 --splits 16
  b "$CL" bench decode --preset writeup002 --iters 30 --splits 12
  b "$C3" bench decode --preset writeup002 --iters 30 --splits 16
  b "$CL" bench decode --preset issue11 --iters 30
} >> "$OUT/bench.txt"
echo "bench done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout "${SIDE_TIMEOUT:-100}" python3 bench/decode_mask_bench.py --fragmask "$CL" --quick \
  --json "$OUT/side.json" > "$OUT/side.log" 2>&1
echo "side done t=${SECONDS}s rc=$?"

# Short table last.
grep -E "sweep:|FAIL|rror|panicked" "$OUT/a_sweep.log" | tail -6
grep -hE "SUMMARY|sweep:|rc=" "$OUT/b_sanitizers.log" "$OUT/c_sanitizers.log"
cat "$OUT/d_other.log"
grep -E "^== |002 " "$OUT/bench.txt" | sed -E 's/ \| 1 \| 64 \| 12 \| 12 \| 23296 \| 128//' | cut -c1-150
grep -E "B=16 H=32/8 Sk=8192 \||B=1 H|B=64|B=8 H|paged 16" "$OUT/bench.txt" | cut -c1-160
sed -n '/^masked \/ top-k decode/,$p' "$OUT/side.log" | cut -c1-130
