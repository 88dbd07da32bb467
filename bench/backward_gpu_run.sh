#!/bin/bash
# One device call for the attention backward (issue 13): the GPU sweep against the CPU f64
# reference, compute-sanitizer memcheck / racecheck / synccheck on small shapes of each variant,
# `fragmask bench backward` at the issue's shapes, then the torch side (bench/backward_bench.py:
# SDPA and FlexAttention backward beside fragmask on the same inputs and masks).
# About 2-3 minutes on an H100 (NVRTC cubins from FRAGMASK_CACHE_DIR if carried).
# Usage on the GPU machine (repo root, binary carried in .carry/): bash bench/backward_gpu_run.sh
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FRAGMASK_CACHE_DIR=${FRAGMASK_CACHE_DIR:-$PWD/.carry/cache}
export PYTHONUNBUFFERED=1
BENCH_DIR=${BENCH_DIR:-bench}   # backward_bench.py and the scripts it imports (bench_common, attention_bench, video_bench)
OUT=${OUT:-/tmp/fragmask_out}; mkdir -p "$OUT"
BIN=$(realpath "${BIN:-.carry/fragmask}")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
timeout 200 "$BIN" attention --selftest --backward > "$OUT/selftest.txt" 2>&1; echo "selftest rc=$?"
grep -E "FAIL|selftest:" "$OUT/selftest.txt" | head -20
{
for v in "--random 1,2,1,200,150,128 --causal --diag-offset -50" \
         "--random 1,2,2,300,260,128 --synthetic-mask random:0.5" \
         "--random 1,2,2,200,200,128 --synthetic-mask random:0.5 --block 64x64" \
         "--random 1,2,1,192,160,256 --window 40,20 --deterministic" \
         "--random 1,2,2,200,200,128 --causal --dq-atomics"; do
  for tool in memcheck racecheck synccheck; do
    r=$(timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN" attention --backward $v 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | tail -1)
    echo "$tool | $v | $r"
  done
done
} > "$OUT/sanitizers.txt" 2>&1
cat "$OUT/sanitizers.txt"
{
for spec in "--random 1,16,16,8192,8192,128" "--random 1,16,16,8192,8192,128 --synthetic-mask random:0.5" \
            "--random 1,16,16,16384,16384,128" "--random 1,16,16,16384,16384,128 --synthetic-mask random:0.5"; do
  for mode in "" "--deterministic"; do
    echo "== bench backward $spec $mode"
    timeout 90 "$BIN" bench backward $spec $mode --warmup 5 --iters 20 2>&1 | tail -1
  done
done
} > "$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt"
timeout 360 python3 "$BENCH_DIR/backward_bench.py" --bin "$BIN" --out "$OUT" --workdir /tmp/fm_bwd --iters 20 \
    > "$OUT/torch_side.txt" 2>&1; echo "backward_bench rc=$?"
tail -20 "$OUT/torch_side.txt"
# Large shapes against torch autograd through fp32 math attention with the same mask (the
# inputs and masks the step above wrote; the check mode of bench/backward_bench.py).
W=/tmp/fm_bwd
for c in "none_8192::" "docs12_8192:--mask $W/mask_docs12_8192.safetensors:--doc-ids $W/doc_ids_docs12_8192.npy"; do
  tag=${c%%:*}; rest=${c#*:}; mflag=${rest%%:*}; cflag=${rest#*:}
  [ -f "$W/inputs_$tag.safetensors" ] || { echo "check $tag: no inputs"; continue; }
  timeout 120 "$BIN" attention --backward --inputs "$W/inputs_$tag.safetensors" $mflag --out "$W/grads_$tag.safetensors" \
      > "$OUT/check_$tag.txt" 2>&1
  timeout 180 python3 "$BENCH_DIR/backward_bench.py" --check "$W/grads_$tag.safetensors" --inputs "$W/inputs_$tag.safetensors" $cflag \
      >> "$OUT/check_$tag.txt" 2>&1; echo "check $tag rc=$?"
  tail -4 "$OUT/check_$tag.txt"
done
