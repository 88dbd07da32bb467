#!/usr/bin/env bash
# The session's last device call (2026-11-25, second session): the final binary and wheel
# of main, checked end to end: the forward selftest (split-KV cases included), the backward
# selftest, the decode sweep with graph replays, the Python GPU tests, and the write-up 002
# decode preset (decode kernel and split forward side by side). Needs .carry/ with
# final/fragmask, cache/, the wheel and test_gpu.py. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
REPO=$PWD
FM=$C/final/fragmask
SECONDS=0
timeout 200 "$FM" attention --selftest > "$OUT/a_selftest_fwd.log" 2>&1
timeout 200 "$FM" attention --selftest --backward > "$OUT/b_selftest_bwd.log" 2>&1
timeout 200 "$FM" decode --sweep --graph > "$OUT/c_decode_sweep.log" 2>&1
echo "selftests done t=${SECONDS}s"
rm -rf /tmp/wheel && mkdir -p /tmp/wheel && python3 -m zipfile -e "$REPO/$C"/fragmask-*.whl /tmp/wheel
(cd "$REPO/$C" && PYTHONPATH=/tmp/wheel PYTHONUNBUFFERED=1 timeout 300 python3 -m unittest test_gpu > "$OUT/d_test_gpu.log" 2>&1)
echo "python done t=${SECONDS}s"
"$FM" bench decode --preset writeup002 --iters 50 > "$OUT/e_bench.txt" 2>&1
echo "bench done t=${SECONDS}s"
tail -1 "$OUT/a_selftest_fwd.log"; tail -1 "$OUT/b_selftest_bwd.log"; grep -E "^sweep:" "$OUT/c_decode_sweep.log"
grep -E "^(Ran|OK|FAILED)" "$OUT/d_test_gpu.log"
grep -E "^\| 002|wgmma" "$OUT/e_bench.txt" | grep -v head-major | sed -E 's/ \| 1 \| 64 \| 12 \| 12 \| 23296 \| 128//' | cut -c1-140
