#!/usr/bin/env bash
# One device call for the backward's largest-first dispatch (issue 13): with a block mask
# the main kernel's CTAs take the mask's key tiles in order of their query-tile counts.
# Needs .carry/ with pdl/fragmask (before: ac45e59) and lpt/fragmask (after), cache/.
# Correctness of lpt first (the backward selftest, sanitizers on block masks), then
# bench/backward_bench.py with both binaries alternately on the same files (docs12 and
# random50 at S=8192, video10 on 64x64 tiles), beside FlexAttention. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
NEW=$C/lpt/fragmask
OLD=$C/pdl/fragmask
SECONDS=0
timeout 300 "$NEW" attention --selftest --backward > "$OUT/a_selftest_bwd.log" 2>&1 &
A=$!
san() {  # TOOL "ARGS" (split into words)
  # shellcheck disable=SC2086
  fm_sanitize "$1" "$NEW" attention --backward $2
}
{
  for tool in memcheck racecheck synccheck; do
    san $tool "--random 1,2,2,300,700,128 --synthetic-mask random:0.3"
    san $tool "--random 1,2,2,256,512,128 --synthetic-mask random:0.3 --block 64x64"
  done
  san memcheck "--random 1,4,2,300,700,256 --synthetic-mask random:0.3"
} > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
wait $A $B
echo "correctness done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 420 python3 bench/backward_bench.py --bin "$NEW" --ab "$OLD" --ab-rounds 3 \
  --out "$OUT" --workdir /tmp/fm_bwd --iters 20 --sizes 8192 --only docs12,random50,video10 > "$OUT/c_bench.log" 2>&1
echo "bench done t=${SECONDS}s"
grep -E "passed|failed|FAIL|failure" "$OUT/a_selftest_bwd.log" | tail -4
grep -E "SUMMARY|rc=|==" "$OUT/b_sanitizers.log"
sed -n '/^backward alone/,$p' "$OUT/c_bench.log" | cut -c1-220
