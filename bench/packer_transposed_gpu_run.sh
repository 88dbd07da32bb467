#!/usr/bin/env bash
# GPU run of the GPU packer's transposed lists (issue 13): GPU == CPU on many shapes and tiles
# (`fragmask verify --packer-only`), compute-sanitizer memcheck/racecheck/synccheck on the small
# checks, and `fragmask bench packer --transposed` at 16384^2 (128x128 and 64x64 tiles).
# Usage on the device: bash bench/packer_transposed_gpu_run.sh BIN   (logs under $OUT)
set -u
BIN=${1:-.carry-bwdaux/fragmask}
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/device.txt" 2>&1
echo "== verify --packer-only"
timeout 200 "$BIN" verify --packer-only > "$OUT/verify_packer.txt" 2>&1
echo "verify rc $?"
grep -E "FAIL|checks:" "$OUT/verify_packer.txt" | tail -5
echo "== compute-sanitizer (verify --packer-only --sanitizer-friendly)"
for tool in memcheck racecheck synccheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN" verify --packer-only \
        --sanitizer-friendly > "$OUT/sanitizer_$tool.txt" 2>&1
    echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.txt" | tail -1)"
done
echo "== bench packer --transposed, 16384^2 random 50%"
for block in 128x128 64x64; do
    "$BIN" bench packer --transposed --block $block --runs 30 --json "$OUT/packer_$block.json" \
        > "$OUT/packer_$block.txt" 2>&1
    echo "bench packer $block rc $?"
    cat "$OUT/packer_$block.txt"
done
