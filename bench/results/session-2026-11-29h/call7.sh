#!/usr/bin/env bash
# Call 7: b6e4ad2 (k40e: the forward's row order, from the GPU packer or the host) against
# fb39aec (k40d): the GPU packer check with the row order and its sanitizers; the forward
# selftest's list cases and the sanitizers on a few; the Python tests of the order; every
# forward row through the Python op (2 rounds); the CLI's --tile-order off on the mask rows.
set -u
source bench/suite/device_env.sh
for x in d e; do
  X=$(echo $x | tr a-z A-Z)
  fm_unxz .carry/k40$x/fm.xz $X "$(cat .carry/k40$x/COMMIT)" && cp .carry/k40$x/*.whl /tmp/$X/
done
site=$(fm_install /tmp/E)
F=/tmp/E/fragmask
timeout 150 $F verify --packer-only > "$OUT/verify.txt" 2>&1
echo "verify rc=$? pass=$(grep -c 'PASS' "$OUT/verify.txt") fail=$(grep -c 'FAIL' "$OUT/verify.txt")" | tee "$OUT/summary.txt"
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 $F verify --packer-only --sanitizer-friendly > "$OUT/san-verify-$tool.txt" 2>&1
  echo "verify $tool rc=$? $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' "$OUT/san-verify-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
timeout 150 $F attention --selftest --cases "random" > "$OUT/selftest-fwd.txt" 2>&1
echo "fwd selftest random rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd.txt")" | tee -a "$OUT/summary.txt"
for tool in memcheck racecheck synccheck; do
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --selftest --cases "random [128x128]" > "$OUT/san-fwd-$tool.txt" 2>&1
  echo "fwd $tool rc=$? pass=$(grep -c '^PASS' "$OUT/san-fwd-$tool.txt") $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-fwd-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
(cd crates/python/tests && PYTHONPATH=$site timeout 150 python3 -m unittest test_gpu.GpuPackerTests test_gpu.FastPathAndPlanTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(grep -E '^Ran' "$OUT/pytests.txt") $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
timeout 200 python3 bench/suite/run.py --ab /tmp/D /tmp/E --rounds 2 --systems fragmask --only '^fwd[.]' --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?" | tee -a "$OUT/summary.txt"
rm -rf "$OUT"/ab-*-rounds
timeout 100 python3 -m bench.suite.flag_pairs $F '^fwd[.](s16384|s4096|d256[.]s16384)[.]blocksparse10$' 3 "--tile-order off" > "$OUT/tile-order.txt" 2>&1
echo "flag pairs rc=$?" | tee -a "$OUT/summary.txt"
grep -E "^FAIL" "$OUT"/selftest-fwd.txt "$OUT/verify.txt" | head -5; grep -E "^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
grep -E "^\| fwd" "$OUT/ab.log"
cat "$OUT/tile-order.txt"
