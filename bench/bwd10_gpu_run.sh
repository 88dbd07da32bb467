#!/usr/bin/env bash
# One device call for programmatic dependent launch in the backward (issue 13): the
# preprocess, main and postprocess kernels chained with griddepcontrol. Needs .carry/ with
# main/fragmask (before: 3a3ba3c) and pdl/fragmask (after), cache/. Correctness of pdl
# first (the backward selftest, sanitizers), then bench/backward_bench.py with both
# binaries alternately on the same files (docs12 and none at S=8192, video10), beside
# FlexAttention and SDPA. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
NEW=$C/pdl/fragmask
OLD=$C/main/fragmask
SECONDS=0
timeout 300 "$NEW" attention --selftest --backward > "$OUT/a_selftest_bwd.log" 2>&1 &
A=$!
san() {  # TOOL "ARGS" (split into words)
  # shellcheck disable=SC2086
  fm_sanitize "$1" "$NEW" attention --backward $2
}
{
  for tool in memcheck racecheck synccheck; do
    san $tool "--random 1,2,1,300,300,128 --causal"
    san $tool "--random 1,2,2,256,512,128 --synthetic-mask random:0.3 --block 64x64"
  done
  san memcheck "--random 1,2,2,300,300,128 --causal --deterministic"
} > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
wait $A $B
echo "correctness done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 420 python3 bench/backward_bench.py --bin "$NEW" --ab "$OLD" --ab-rounds 3 \
  --out "$OUT" --workdir /tmp/fm_bwd --iters 20 --sizes 8192 --only docs12,none,video10 > "$OUT/c_bench.log" 2>&1
echo "bench done t=${SECONDS}s"
grep -E "passed|failed|FAIL|failure" "$OUT/a_selftest_bwd.log" | tail -4
grep -E "SUMMARY|rc=|==" "$OUT/b_sanitizers.log"
sed -n '/^backward alone/,$p' "$OUT/c_bench.log" | cut -c1-220
