# Sourced by the bench/*_gpu_run.sh device scripts (run from the repository root on the
# lent GPU machine): the CUDA 13 runtime and tools, $C (the carried folder, CARRY or
# .carry), $OUT (files that come back), FRAGMASK_CACHE_DIR pointing at a writable copy of
# the carried NVRTC cubins, the device's name in $OUT/device.txt, and fm_sanitize.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
C=${CARRY:-.carry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/fm-cache
if [ -d "$C/cache" ]; then cp -r "$C/cache/." /tmp/fm-cache/; fi
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/device.txt"

# fm_sanitize TOOL BINARY ARGS...: compute-sanitizer's TOOL on one call, its summary lines
# and the exit status (9: the tool found errors).
fm_sanitize() {
  local tool=$1
  shift
  echo "== compute-sanitizer --tool $tool: $*"
  timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 9 "$@" 2>&1 \
    | grep -E "SUMMARY|sweep:|FAIL|rror" | head -12
  echo "rc=${PIPESTATUS[0]}"
}
