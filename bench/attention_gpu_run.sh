#!/bin/bash
# One device call: correctness sweep, sanitizers, then the side-by-side benchmark.
# Usage on the GPU machine (repo root, binary carried in .carry/):
#   STEPS=selftest,sanitize,bench,d64 VARIANTS='pp=--pingpong true' bash bench/attention_gpu_run.sh
# Steps: demo (`fragmask demo` -> $OUT/demo.txt), cli (`fragmask bench attention` on one shape),
# selftest, sanitize, bench (D=128, S in {4096,16384}, all masks; mask build times from
# `fragmask bench packer`), d64. BENCH_TIMEOUT (s) bounds the bench step (default 420).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FRAGMASK_CACHE_DIR=${FRAGMASK_CACHE_DIR:-$PWD/.carry/cache}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fragmask_out}; mkdir -p "$OUT"
BIN=.carry/fragmask
STEPS=${STEPS:-selftest,sanitize,bench}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
selftest() {  # $1 = label, rest = extra flags
  local label=$1; shift
  timeout 100 $BIN attention --selftest "$@" > "$OUT/selftest_$label.txt" 2>&1; local rc=$?
  echo "selftest[$label] rc=$rc: $(grep -c PASS "$OUT/selftest_$label.txt") pass, $(grep -c FAIL "$OUT/selftest_$label.txt") fail"
  grep FAIL "$OUT/selftest_$label.txt" | head -5
  if [[ $rc == 124 ]]; then echo "selftest timed out (hang?): stopping"; exit 1; fi
}
if [[ $STEPS == *demo* ]]; then
  echo "== demo"
  timeout 120 $BIN demo > "$OUT/demo.txt" 2>&1; echo "demo rc=$?"
  sed -n '/== 4\./,$p' "$OUT/demo.txt"
fi
if [[ $STEPS == *cli* ]]; then
  echo "== fragmask bench attention (one shape per mask mode)"
  for m in "--causal" "--synthetic-mask random:0.5"; do
    echo "\$ fragmask bench attention --random 1,16,16,4096,4096,128 $m"
    timeout 60 $BIN bench attention --random 1,16,16,4096,4096,128 $m 2>&1 | tee -a "$OUT/bench_attention_cli.txt"
    echo "rc=${PIPESTATUS[0]}"
  done
  echo "\$ CUDA_VISIBLE_DEVICES= fragmask bench attention --random 1,16,16,4096,4096,128 --causal"
  CUDA_VISIBLE_DEVICES= timeout 30 $BIN bench attention --random 1,16,16,4096,4096,128 --causal 2>&1 \
    | tee -a "$OUT/bench_attention_cli.txt"; echo "rc=${PIPESTATUS[0]} (3 = no GPU)"
fi
if [[ $STEPS == *selftest* ]]; then
  echo "== selftest"
  selftest default
  selftest no-lookahead --lookahead false
  selftest no-pingpong --pingpong false
  grep -E "rel_err" "$OUT/selftest_default.txt" | awk '{print $NF, $0}' | cut -c1-150 | head -3
fi
if [[ $STEPS == *sanitize* ]]; then
  echo "== compute-sanitizer"
  for tool in memcheck racecheck; do
    for m in "--causal" "--synthetic-mask random:0.3" "--window 40,10 --pingpong false"; do
      timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $BIN attention --random 1,2,1,300,260,128 $m \
        > "$OUT/san_${tool}.log" 2>&1; echo "$tool [$m] rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_${tool}.log" | tail -1)"
    done
  done
fi
if [[ $STEPS == *bench* ]]; then
  echo "== benchmark D=128"
  timeout "${BENCH_TIMEOUT:-420}" python3 bench/attention_bench.py --bin $BIN --out "$OUT" --variants "${VARIANTS:-}" "$@" 2>&1 \
    | tee "$OUT/bench.txt" | grep -v '^{'
fi
if [[ $STEPS == *d64* ]]; then
  echo "== benchmark D=64"; mkdir -p "$OUT/d64"
  timeout 200 python3 bench/attention_bench.py --bin $BIN --out "$OUT/d64" --dim 64 --sizes 16384 \
    --masks none,random50,topk --variants "${VARIANTS:-}" 2>&1 | tee "$OUT/d64/bench.txt" | grep -v '^{'
fi
