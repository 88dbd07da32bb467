#!/usr/bin/env bash
# pyops run 2: the package's tests (CPU, torch, GPU; the CLI's forward compared through
# FRAGMASK_BIN), bench/python_overhead.py, and the CLI's attention entry point on a
# decode shape beside fragmask bench decode.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
rm -rf /tmp/fm_pyops /tmp/pyops_repo
python3 -m pip install -q --no-index --no-deps --target /tmp/fm_pyops "$here"/fragmask-*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/fm_pyops
mkdir -p /tmp/pyops_repo/crates/python/tests /tmp/pyops_repo/bin
cp "$here"/test_*.py /tmp/pyops_repo/crates/python/tests/
cp "$here"/fragmask /tmp/pyops_repo/bin/fragmask && chmod +x /tmp/pyops_repo/bin/fragmask
export FRAGMASK_BIN=/tmp/pyops_repo/bin/fragmask
cd /tmp/pyops_repo/crates/python/tests
start=$(date +%s)
timeout 115 python3 -m unittest -v test_cpu test_torch test_gpu > "$OUT/tests.txt" 2>&1
echo "tests rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$OUT/tests.txt"
start=$(date +%s)
{
  timeout 20 "$FRAGMASK_BIN" attention --random 16,32,8,1,8192,128 --bench
  echo "-- forced forward (--splits 8):"
  timeout 15 "$FRAGMASK_BIN" attention --random 16,32,8,1,8192,128 --bench --splits 8
  echo "-- fragmask bench decode (defaults: B=16 q=1 H=32 Hkv=8 Sk=8192):"
  timeout 20 "$FRAGMASK_BIN" bench decode
} > "$OUT/cli.txt" 2>&1
echo "cli rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$OUT/cli.txt"
start=$(date +%s)
timeout 80 python3 "$here/python_overhead.py" --json "$OUT/overhead.json" > "$OUT/bench.txt" 2>&1
echo "bench rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$OUT/bench.txt"
echo "== summary"
grep -E "^(FAIL|ERROR):|^Ran |^OK|^FAILED|tests rc" "$OUT/tests.txt" | head -40
grep -E "median|kernel:|^\| issue11|roof|cli rc" "$OUT/cli.txt" | head -12
grep -A40 "^Host overhead" "$OUT/bench.txt" | head -30
tail -3 "$OUT/bench.txt"
