#!/usr/bin/env bash
# One device call for lightning decode (issue 14): correctness over 1000 steps against the
# f64 reference (every geometry, dtypes, D = 96 / 128, n = 1 / 4), compute-sanitizer
# memcheck / racecheck / synccheck, then the side-by-side benchmark. Logs under $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
FM=${FM:-.carry/fragmask}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
fail=0
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  for case in "2,64,1,96 --dtype bf16 --col-vectors 8" "2,64,1,96 --dtype bf16 --col-vectors 4" \
              "1,64,1,96 --dtype f16" "1,64,1,96 --dtype f32" "2,16,4,96 --dtype bf16" \
              "2,32,1,128 --dtype bf16 --col-vectors 8" "2,32,1,128 --dtype bf16 --col-vectors 4" \
              "1,8,3,64 --dtype bf16" "1,8,1,256 --dtype bf16" "3,5,9,96,64 --dtype bf16"; do
    echo "== fragmask lightning --random $case --steps 1000"
    $FM lightning --random $case --steps 1000 || fail=1
  done
  for tool in memcheck racecheck synccheck; do
    for cv in 8 4; do
      echo "== compute-sanitizer --tool $tool (col-vectors $cv)"
      compute-sanitizer --tool $tool --error-exitcode 9 $FM lightning --random 2,8,3,96 --steps 2 --col-vectors $cv 2>&1 | tail -4 || fail=1
    done
  done
} 2>&1 | tee "$OUT/lightning_check.log"
grep -q FAIL "$OUT/lightning_check.log" && fail=1
echo "== bench: every geometry, D=96, n=1 (dependent launch on, the default)"
$FM bench lightning --col-vectors all --json "$OUT/fm_all.json" 2>&1 | tee "$OUT/lightning_geometries.log"
echo "== bench: the chosen geometry without dependent launch"
$FM bench lightning --no-dependent-launch 2>&1 | tee "$OUT/lightning_no_pdl.log"
echo "== side by side D=96 n=1"
PYTHONUNBUFFERED=1 python3 bench/lightning_bench.py --fragmask $FM --json "$OUT/side_96.json" 2>&1 | tee "$OUT/lightning_side_96.log" | grep -v "^\$\|^|---" | tail -40
[ "${QUICK:-0}" = 1 ] && { echo "checks: $([ $fail = 0 ] && echo all passed || echo FAILED)"; exit 0; }
echo "== side by side D=128 n=1 and D=96 n=4"
PYTHONUNBUFFERED=1 python3 bench/lightning_bench.py --fragmask $FM --dim 128 --json "$OUT/side_128.json" 2>&1 | tee "$OUT/lightning_side_128.log" | tail -8
PYTHONUNBUFFERED=1 python3 bench/lightning_bench.py --fragmask $FM --tokens 4 --json "$OUT/side_n4.json" 2>&1 | tee "$OUT/lightning_side_n4.log" | tail -8
echo "checks: $([ $fail = 0 ] && echo all passed || echo FAILED)"
