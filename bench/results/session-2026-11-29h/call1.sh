#!/usr/bin/env bash
# Call 1: da114f6 (the GPU transposer's largest-first tile order, run by the backward's
# plans) against 0728792 (the same backward kernels outside the deterministic dense one):
# the transposed packer's GPU == CPU check (tile order included) and its sanitizers, the
# backward "device count" selftest cases (their transposed lists now carry the uploaded
# order), the Python GPU tests, and an A/B (2 rounds, the Python op) of the mask rows whose
# masks the GPU packer builds.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k40a/fm.xz N "$(cat .carry/k40a/COMMIT)" && cp .carry/k40a/*.whl /tmp/N/
fm_unxz .carry/k39f/fm.xz B "$(cat .carry/k39f/COMMIT)" && cp .carry/k39f/*.whl /tmp/B/
site=$(fm_install /tmp/N)
F=/tmp/N/fragmask
timeout 120 $F verify --packer-only > "$OUT/verify.txt" 2>&1
echo "verify rc=$? $(grep -ci 'fail' "$OUT/verify.txt") fail-lines; $(grep -c 'transposed packer' "$OUT/verify.txt") transposed lines" | tee "$OUT/summary.txt"
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 $F verify --packer-only --sanitizer-friendly > "$OUT/san-verify-$tool.txt" 2>&1
  echo "verify $tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-verify-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
timeout 90 $F attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 99 $F attention --backward --selftest --cases "device count" > "$OUT/san-bwd-memcheck.txt" 2>&1
echo "bwd memcheck rc=$? $(grep -o 'ERROR SUMMARY: .*' "$OUT/san-bwd-memcheck.txt" | tail -1)" | tee -a "$OUT/summary.txt"
(cd crates/python/tests && PYTHONPATH=$site timeout 150 python3 -m unittest test_gpu.GpuPackerTests test_gpu.DeterministicBackwardTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
timeout 250 python3 bench/suite/run.py --ab /tmp/B /tmp/N --rounds 2 --systems fragmask \
  --only '^bwd[.]s16384[.](none|random50|topk8|blocksparse10)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?" | tee -a "$OUT/summary.txt"
rm -rf "$OUT"/ab-*-rounds
grep -E "^FAIL|FAIL:|ERROR:" "$OUT"/selftest-*.txt "$OUT/pytests.txt" "$OUT/verify.txt" | head
tail -10 "$OUT/ab.log" | grep -v "^# round"
