#!/usr/bin/env bash
# Call 7: d049a4d (the run-time density check forward at head dims 64 and 256, and in the
# deterministic backward) against bed604f: the "device count" selftest cases, the Python
# GPU packer and deterministic-backward tests, and an A/B (2 rounds, the Python op) of the
# rows the final choice touches or reverts.
set -u
source bench/suite/device_env.sh
for x in a d; do
  X=$(echo $x | tr a-z A-Z)
  fm_unxz .carry/k39$x/fm.xz $X "$(cat .carry/k39$x/COMMIT)" && cp .carry/k39$x/*.whl /tmp/$X/
done
site=$(fm_install .carry/k39d)
timeout 60 /tmp/D/fragmask attention --selftest --cases "device count" > "$OUT/selftest-fwd.txt" 2>&1
echo "fwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd.txt")" | tee "$OUT/summary.txt"
timeout 60 /tmp/D/fragmask attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
for tool in memcheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/D/fragmask attention --selftest --cases "device count" > "$OUT/san-fwd-$tool.txt" 2>&1
  echo "fwd $tool rc=$? $(grep -o '\(ERROR\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-fwd-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
(cd crates/python/tests && PYTHONPATH=$site timeout 120 python3 -m unittest test_gpu.GpuPackerTests test_gpu.DeterministicBackwardTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
timeout 200 python3 bench/suite/run.py --ab /tmp/A /tmp/D --rounds 2 --systems fragmask \
  --only '^(fwd[.](s16384|s4096)[.]blocksparse10|fwd[.]s16384[.](random50|topk8)|fwd[.]d256[.]s16384[.](topk8|blocksparse10)|fwd[.]d64[.]s16384[.]random50|bwd[.]s16384[.]random50([.]det)?)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?" | tee -a "$OUT/summary.txt"
rm -rf "$OUT"/ab-*-rounds
grep -E "^FAIL|FAIL:" "$OUT"/selftest-*.txt "$OUT/pytests.txt" | head
tail -14 "$OUT/ab.log" | grep -v "^# round"
