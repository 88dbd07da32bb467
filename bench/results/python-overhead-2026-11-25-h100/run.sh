#!/usr/bin/env bash
# py (h/py, wheel of the commit in COMMIT): the Python op layer on one H100.
#  1. A/B of the op rows (python_overhead.py --ops-only): base wheel (the branch point,
#     92a6027) and new wheel, alternated twice, each in a fresh process.
#  2. The target table with the new wheel (python_overhead.py --targets-only).
#  3. The decode shape's diagnostics (--decode-diagnostics) and the CLI's decode rows.
#  4. The Python GPU and torch tests (test_gpu, test_torch) with the new wheel.
# About 3.5 minutes.
set -u
here=.carry/py
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
for w in base new; do
  rm -rf /tmp/fm_py_$w
  python3 -m pip install -q --no-index --no-deps --target /tmp/fm_py_$w "$here"/$w/fragmask-*.whl 2>&1 | tail -2
done
chmod +x "$here/fragmask-cli" 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader
  cat "$here/COMMIT"; python3 -c "import torch; print(torch.__version__)"; nproc; } > "$OUT/device.txt" 2>&1
run() { echo "$1 rc=$2 ($(( $(date +%s) - t0 )) s)" | tee -a "$OUT/run.txt"; }

for i in 1 2; do
  for w in base new; do
    PYTHONPATH=/tmp/fm_py_$w timeout -k 5 45 python3 "$here/python_overhead.py" --ops-only \
      --json "$OUT/ops_${w}_$i.json" > "$OUT/ops_${w}_$i.txt" 2>&1
    run "ops $w $i" $?
  done
done

PYTHONPATH=/tmp/fm_py_new timeout -k 5 75 python3 "$here/python_overhead.py" --targets-only \
  --json "$OUT/overhead.json" > "$OUT/bench.txt" 2>&1
run bench $?

PYTHONPATH=/tmp/fm_py_new timeout -k 5 40 python3 "$here/python_overhead.py" \
  --decode-diagnostics --json "$OUT/decode_diag.json" > "$OUT/decode_diag.txt" 2>&1
run decode-diagnostics $?
{ echo "-- fragmask bench decode"; timeout 25 "$here/fragmask-cli" bench decode
  echo "-- fragmask attention --random 16,32,8,1,8192,128 --bench"
  timeout 25 "$here/fragmask-cli" attention --random 16,32,8,1,8192,128 --bench; } > "$OUT/cli.txt" 2>&1
run cli $?

left=$(( 230 - ($(date +%s) - t0) ))
[ "$left" -lt 30 ] && left=30
(
  cd "$here/tests" || exit 1
  PYTHONPATH=/tmp/fm_py_new FRAGMASK_BIN="$OLDPWD/$here/fragmask-cli" timeout -k 5 "$left" \
    python3 -m unittest -v test_gpu test_torch
) > "$OUT/tests.txt" 2>&1
run "tests (limit $left s)" $?

echo "== summary"
cat "$OUT/device.txt"
cat "$OUT/run.txt"
grep -E "^(FAIL|ERROR):|^Ran |^OK|^FAILED" "$OUT/tests.txt" | head -20
for f in "$OUT"/ops_*.txt; do echo "-- $(basename "$f")"; grep -E "^\| (attention|SDPA|decode|DecodePlan|lightning|AttentionPlan|floor)" "$f"; done
sed -n '/^Targets/,$p' "$OUT/bench.txt"
cat "$OUT/decode_diag.txt" | grep "^|"
grep -E "median|of roof|custom" "$OUT/cli.txt"
