#!/usr/bin/env bash
# Call 6: d29d786 (dense lists checked at run time: the forward over masks left on the GPU,
# the deterministic backward) against bed604f. The selftests' "device count" cases and the
# Python GPU packer tests; the A/B of the suite's GPU-packed rows (Python op, 2 rounds,
# A and B alternating); then the suite's rows that changed, beside Flex, for PERF.md.
set -u
source bench/suite/device_env.sh
for x in a c; do
  X=$(echo $x | tr a-z A-Z)
  fm_unxz .carry/k39$x/fm.xz $X "$(cat .carry/k39$x/COMMIT)" && cp .carry/k39$x/*.whl /tmp/$X/
done
site=$(fm_install .carry/k39c)
c=$(cat .carry/k39c/COMMIT)
timeout 60 /tmp/C/fragmask attention --selftest --cases "device count" > "$OUT/selftest-fwd.txt" 2>&1
echo "fwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd.txt")" | tee "$OUT/summary.txt"
timeout 60 /tmp/C/fragmask attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
(cd crates/python/tests && PYTHONPATH=$site timeout 90 python3 -m unittest test_gpu.GpuPackerTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
timeout 200 python3 bench/suite/run.py --ab /tmp/A /tmp/C --rounds 2 --systems fragmask \
  --only '^((fwd|bwd)[.](d64[.]|d256[.]|fp16[.])?s(4096|8192|16384)[.](random(10|50)|blocksparse10|topk8)([.]det)?|(fwd|bwd)[.]s16384[.]none)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?" | tee -a "$OUT/summary.txt"
timeout 250 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/C/fragmask --commit "$c" \
  --systems fragmask,fragmask_cli,flex --budget-s 230 \
  --only '^(fwd[.]s16384[.](random50|topk8)|fwd[.]d64[.]s16384[.]random50|bwd[.]s16384[.]random50[.]det)$' \
  --output "$OUT/suite-$c-h200.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?" | tee -a "$OUT/summary.txt"
rm -rf "$OUT"/ab-*-rounds
tail -26 "$OUT/ab.log" | grep -v "^# round"
tail -8 "$OUT/suite.log"
