#!/usr/bin/env bash
# One device call for the QK-chain A/B of write-up 002's decode (issue 11). Needs .carry/
# from bench/decode6_prepare.sh: base/fragmask (main), ch2/fragmask (two MMA chains per
# score tile), cache/. Correctness of ch2 first (sweep with graph replays, sanitizers),
# then alone on the GPU: both binaries on the writeup002 preset, interleaved, and the
# density x split-count scan of bench/decode_split_scan.py. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
BASE=$C/base/fragmask
CH2=$C/ch2/fragmask
SECONDS=0

timeout 150 "$CH2" decode --sweep --graph > "$OUT/a_sweep.log" 2>&1 &
A=$!
san() { fm_sanitize "$1" "$CH2" decode --sweep --sweep-only "$2"; }
{ san memcheck "shared K/V"; san racecheck "shared K/V, 16 splits"; } > "$OUT/b_sanitizers.log" 2>&1 &
B=$!
{ san synccheck "shared K/V"; san memcheck "causal"; } > "$OUT/c_sanitizers.log" 2>&1 &
S=$!
wait $A $B $S
echo "correctness done t=${SECONDS}s"

b() { echo "== $* (t=${SECONDS}s)"; "$@" 2>&1; }
{
  for round in 1 2; do
    b "$BASE" bench decode --preset writeup002 --iters 50
    b "$CH2" bench decode --preset writeup002 --iters 50
  done
} >> "$OUT/bench.txt"
echo "bench done t=${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 300 python3 bench/decode_split_scan.py --fragmask "$BASE" --fragmask "$CH2" \
  --fractions 0.01,0.05,0.1,0.2,0.5 --splits 0,8,12,16 > "$OUT/scan.log" 2>&1
echo "scan done t=${SECONDS}s"

# Short table last.
grep -E "sweep:|FAIL|rror|panicked" "$OUT/a_sweep.log" | tail -4
grep -hE "SUMMARY|sweep:|rc=" "$OUT/b_sanitizers.log" "$OUT/c_sanitizers.log"
grep -E "^== |002 " "$OUT/bench.txt" | grep -v head-major | sed -E 's/ \| 1 \| 64 \| 12 \| 12 \| 23296 \| 128//' | cut -c1-130
sed -n '/^masked decode/,$p' "$OUT/scan.log"
