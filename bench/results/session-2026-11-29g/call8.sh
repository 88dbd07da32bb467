#!/usr/bin/env bash
# Call 8: 8052ddc (the deterministic rank on the schedule's density flag): the backward's
# "device count" selftest cases and compute-sanitizer on them, then runtime_ab.py's
# deterministic rows (a mask left on the device against the same mask read back, 4 ABBA pairs).
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k39e/fm.xz E "$(cat .carry/k39e/COMMIT)"
site=$(fm_install .carry/k39e)
bin=/tmp/E/fragmask
timeout 60 $bin attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee "$OUT/summary.txt"
for tool in memcheck synccheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention --backward --selftest --cases "device count" > "$OUT/san-bwd-$tool.txt" 2>&1
  echo "bwd $tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-bwd-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
PYTHONPATH=$site timeout 150 python3 bench/results/session-2026-11-29g/runtime_ab.py 4 'det$' 2>&1 | tee "$OUT/runtime_ab_det.txt"
