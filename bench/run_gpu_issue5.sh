#!/usr/bin/env bash
# Issue 5 on the GPU machine, in one go: fragmask verify, bench sass / apply / packer,
# FlexAttention's create_block_mask on the same mask, and compute-sanitizer memcheck +
# racecheck on `verify --sanitizer-friendly`. Full logs under $OUT, a short table last.
#
# Build on the CPU machine first (the GPU machine has no Rust):
#   cargo build --release && mkdir -p .carry && cp target/release/fragmask .carry/
#   FRAGMASK_CACHE_DIR=.carry/nvrtc-cache .carry/fragmask verify --compile-only  # optional: NVRTC cache
# then run this script there with .carry carried.
set -u
cd "$(dirname "$0")/.."
BIN=${FRAGMASK_BIN:-.carry/fragmask}
OUT=${OUT:-/tmp/fragmask-issue5}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export FRAGMASK_CACHE_DIR=${FRAGMASK_CACHE_DIR:-$PWD/.carry/nvrtc-cache}
export PYTHONUNBUFFERED=1
LOG="$OUT/gpu_run.log"
: > "$LOG"
status() { printf '%-34s %s\n' "$1" "$2" >> "$OUT/summary.txt"; }
: > "$OUT/summary.txt"

run() { # name, timeout, command...
  local name=$1 limit=$2; shift 2
  echo "===== $name: $* =====" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  echo "===== $name: exit $rc after $((SECONDS - t0)) s =====" | tee -a "$LOG"
  status "$name" "exit $rc ($((SECONDS - t0)) s)"
  return $rc
}

{ date -u; nvidia-smi; "$BIN" --version; } >> "$LOG" 2>&1
run "verify" 240 "$BIN" verify
run "bench apply" 180 "$BIN" bench apply --json "$OUT/bench_apply.json"
run "bench packer (random 50%)" 180 "$BIN" bench packer
run "bench packer (causal)" 180 "$BIN" bench packer --pattern causal --no-cpu
run "packer vs FlexAttention" 300 python3 bench/packer_bench.py --fragmask "$BIN" --out "$OUT"
if command -v compute-sanitizer >/dev/null; then
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN" verify --sanitizer-friendly > "$OUT/memcheck.log" 2>&1
  status "compute-sanitizer memcheck" "exit $? ($(grep -c 'ERROR SUMMARY' "$OUT/memcheck.log") summary line; $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1))"
  timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN" verify --sanitizer-friendly > "$OUT/racecheck.log" 2>&1
  status "compute-sanitizer racecheck" "exit $? ($(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1))"
else
  status "compute-sanitizer" "not found"
fi
cat "$OUT/summary.txt" >> "$LOG"
echo
echo "===== short table ====="
grep -E "checks:|FAIL" "$LOG" | head -20
grep -E "RowMajor / QuadLane|^(fragment-native|quad-lane|row-major) " "$LOG" | head -4
grep -E "^fragmask_bench_|one 128x128x128" "$LOG"
grep -E "GPU packer:|input .*GB/s|CPU packer" "$LOG"
grep -A8 "^Same " "$LOG"
cat "$OUT/summary.txt"
rm -f "$OUT/summary.txt"
