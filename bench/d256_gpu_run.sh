#!/bin/bash
# One device call for head dim 256: the self-test sweep (default, no lookahead, no
# ping-pong), compute-sanitizer memcheck/racecheck/synccheck on D=256 shapes, then the side-by-side
# benchmark at D=256 (bench/attention_bench.py --dim 256). Logs go to $OUT/d256.tgz, the
# summary to stdout. Usage on the GPU machine (binary carried in .carry/):
#   SIZES=4096,16384 [MASKS=none,causal] [VARIANTS='nopp=--pingpong false'] bash bench/d256_gpu_run.sh
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FRAGMASK_CACHE_DIR=${FRAGMASK_CACHE_DIR:-$PWD/.carry/cache}
export PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/fragmask_out}; LOGS=/tmp/d256_logs; mkdir -p "$FINAL" "$LOGS"
OUT=$LOGS STEPS=selftest bash bench/attention_gpu_run.sh
echo "== compute-sanitizer, D=256"
for tool in memcheck racecheck synccheck; do
  for m in "--causal" "--synthetic-mask random:0.3" "--window 40,10"; do
    timeout 90 compute-sanitizer --tool $tool --error-exitcode 9 .carry/fragmask attention --random 1,2,1,300,260,256 $m \
      > "$LOGS/san_${tool}_d256.log" 2>&1
    echo "$tool [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/san_${tool}_d256.log" | tail -1)"
  done
done
echo "== benchmark D=256"
mkdir -p "$LOGS/bench"
timeout "${BENCH_TIMEOUT:-400}" python3 bench/attention_bench.py --bin .carry/fragmask --out "$LOGS/bench" --dim 256 \
  --sizes "${SIZES:-4096,16384}" ${MASKS:+--masks "$MASKS"} ${VARIANTS:+--variants "$VARIANTS"} 2>&1 | tee "$LOGS/bench/bench.txt" | grep -v '^{'
tar czf "$FINAL/d256.tgz" -C "$LOGS" .
