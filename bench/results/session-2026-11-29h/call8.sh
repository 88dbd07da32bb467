#!/usr/bin/env bash
# Call 8: is the list kernels' row-order read (b6e4ad2) a cost where the order is the grid's
# own? Top-k and random 50% (every row visits every key tile): the CLI's host masks (no
# table: the null branch) interleaved against fb39aec, and the Python op's GPU masks (the
# packer's table, the grid's order) over 3 rounds; a no-mask control (same SASS). Then
# compute-sanitizer on two forward list cases that upload the host row order.
set -u
source bench/suite/device_env.sh
for x in d e; do
  X=$(echo $x | tr a-z A-Z)
  fm_unxz .carry/k40$x/fm.xz $X "$(cat .carry/k40$x/COMMIT)" && cp .carry/k40$x/*.whl /tmp/$X/
done
F=/tmp/E/fragmask
R='^fwd[.](d256[.]s16384[.](topk8|random50)|s16384[.](topk8|none))$'
timeout 170 python3 bench/suite/run.py --ab /tmp/D /tmp/E --interleave --rounds 3 --only "$R" --out "$OUT" > "$OUT/ab-cli.log" 2>&1
echo "ab cli rc=$?"
timeout 150 python3 bench/suite/run.py --ab /tmp/D /tmp/E --rounds 3 --systems fragmask --only "$R" --out "$OUT" > "$OUT/ab-py.log" 2>&1
echo "ab py rc=$?"
rm -rf "$OUT"/ab-*-rounds
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --selftest --cases "blocks random 50% d128 per-head 300x300" > "$OUT/san-fwd-$tool.txt" 2>&1
  echo "fwd $tool rc=$? pass=$(grep -c '^PASS' "$OUT/san-fwd-$tool.txt") fail=$(grep -c '^FAIL' "$OUT/san-fwd-$tool.txt") $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-fwd-$tool.txt" | tail -1)"
done
grep -E "^\| fwd" "$OUT/ab-cli.log" | tail -4
grep -E "^\| fwd" "$OUT/ab-py.log" | tail -4
