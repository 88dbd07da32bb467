#!/usr/bin/env bash
# Call 4: 9bf03a3 (B) against bed604f (A). First the forward "device count" selftest and the
# new Python test; then the suite's rows whose masks the GPU packer builds and leaves on the
# device (the fragmask column: the Python op), A and B alternating, 2 rounds, plus two
# unaffected control rows.
set -u
source bench/suite/device_env.sh
for x in a b; do
  X=$(echo $x | tr a-z A-Z)
  fm_unxz .carry/k39$x/fm.xz $X "$(cat .carry/k39$x/COMMIT)" && cp .carry/k39$x/*.whl /tmp/$X/
done
site=$(fm_install .carry/k39b)
timeout 90 /tmp/B/fragmask attention --selftest --cases "device count" > "$OUT/selftest-fwd.txt" 2>&1
echo "fwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd.txt")" | tee "$OUT/summary.txt"
(cd crates/python/tests && PYTHONPATH=$site timeout 90 python3 -m unittest test_gpu.GpuPackerTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
timeout 430 python3 bench/suite/run.py --ab /tmp/A /tmp/B --rounds 2 --systems fragmask \
  --only '^((fwd|bwd)[.](d64[.]|d256[.]|fp16[.])?s(4096|8192|16384)[.](random(10|50)|blocksparse10|topk8)([.]det)?|(fwd|bwd)[.]s16384[.]none)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?" | tee -a "$OUT/summary.txt"
tail -32 "$OUT/ab.log"
