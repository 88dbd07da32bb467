#!/usr/bin/env bash
# One device call for the split-KV forward from Python (issue 11): the wheel's GPU tests
# (tests/test_gpu.py: attention with a split-KV case, autograd, decode, lightning), the
# forward's selftest (the raw launch path now shared with split-KV) and the write-up 002
# shape through the Python op against fp32 torch and timed beside the CLI's numbers.
# CARRY holds main/fragmask, cache/, the wheel and test_gpu.py. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
REPO=$PWD
SECONDS=0
timeout 300 "$C/main/fragmask" attention --selftest > "$OUT/a_selftest.log" 2>&1
echo "selftest done t=${SECONDS}s"
rm -rf /tmp/wheel && mkdir -p /tmp/wheel && python3 -m zipfile -e "$REPO/$C"/fragmask-*.whl /tmp/wheel
(cd "$REPO/$C" && PYTHONPATH=/tmp/wheel PYTHONUNBUFFERED=1 timeout 400 python3 -m unittest -v test_gpu > "$OUT/b_test_gpu.log" 2>&1)
echo "test_gpu done t=${SECONDS}s rc=$?"
PYTHONPATH=/tmp/wheel PYTHONUNBUFFERED=1 timeout 120 python3 bench/split_forward_python.py > "$OUT/c_python_002.log" 2>&1
echo "python 002 done t=${SECONDS}s"
tail -1 "$OUT/a_selftest.log"
grep -E "^(Ran|OK|FAILED)|FAIL:|ERROR:" "$OUT/b_test_gpu.log" | head -20
cat "$OUT/c_python_002.log" | tail -8
