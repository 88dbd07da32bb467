#!/usr/bin/env bash
# One device call after the split-KV planner (issue 11): the forward's selftest (the
# planner now splits small grids by default), then alone on the GPU `bench decode --preset
# writeup002` (decode rows, the forward at the planner's count and a scan) and
# bench/decode_mask_bench.py --quick: FlexAttention, SDPA, the decode and the split forward
# on the same lists in one run. Needs .carry/ from bench/split7_prepare.sh. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
FM=$C/main/fragmask
SECONDS=0
timeout 300 "$FM" attention --selftest > "$OUT/a_selftest.log" 2>&1
echo "selftest done t=${SECONDS}s rc=$?"
"$FM" bench decode --preset writeup002 --iters 50 > "$OUT/bench.txt" 2>&1
echo "bench done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/decode_mask_bench.py --fragmask "$FM" --quick > "$OUT/side.log" 2>&1
echo "side done t=${SECONDS}s"
tail -1 "$OUT/a_selftest.log"
grep -E "^\| 002|wgmma" "$OUT/bench.txt" | grep -v head-major | sed -E 's/ \| 1 \| 64 \| 12 \| 12 \| 23296 \| 128//' | cut -c1-140
sed -n '/^masked \/ top-k decode/,$p' "$OUT/side.log" | cut -c1-130
