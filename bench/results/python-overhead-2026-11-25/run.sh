#!/usr/bin/env bash
# pyops (wheel of commit in COMMIT): bench/python_overhead.py --targets-only (JSON written
# after every row), then the Python GPU and torch tests in place. At most ~110 s wall.
set -u
here=.carry/pyops
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
rm -rf /tmp/fm_pyops
python3 -m pip install -q --no-index --no-deps --target /tmp/fm_pyops "$here"/fragmask-*.whl 2>&1 | tail -2
chmod +x "$here/fragmask-cli" 2>/dev/null
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat "$here/COMMIT"; } > "$OUT/device.txt" 2>&1
start=$(date +%s)
PYTHONPATH=/tmp/fm_pyops timeout -k 5 56 python3 "$here/python_overhead.py" --targets-only \
  --json "$OUT/overhead.json" > "$OUT/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$OUT/bench.txt"
left=$(( 100 - ($(date +%s) - t0) ))
[ "$left" -lt 10 ] && left=10
start=$(date +%s)
(
  cd crates/python/tests || exit 1
  PYTHONPATH=/tmp/fm_pyops FRAGMASK_BIN="$OLDPWD/$here/fragmask-cli" timeout -k 5 "$left" \
    python3 -m unittest -v test_gpu test_torch
) > "$OUT/tests.txt" 2>&1
echo "tests rc=$? ($(( $(date +%s) - start )) s, limit $left s)" | tee -a "$OUT/tests.txt"
echo "== summary"
cat "$OUT/device.txt"
grep -E "^(FAIL|ERROR):|^Ran |^OK|^FAILED|tests rc" "$OUT/tests.txt" | head -20
grep -c " ok$" "$OUT/tests.txt"
grep -A30 "^Host overhead" "$OUT/bench.txt" | head -50
tail -2 "$OUT/bench.txt"
