#!/usr/bin/env bash
# Call 2: dense lists checked at run time (ListEntries::DenseAtRunTime) for masks left on the GPU.
# The selftests' "device count" cases (forward on every geometry, backward incl. deterministic),
# the Python GPU and torch tests, then compute-sanitizer memcheck / racecheck / synccheck on
# those selftest cases.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k39b/fm.xz B "$(cat .carry/k39b/COMMIT)"
site=$(fm_install .carry/k39b)
bin=/tmp/B/fragmask
timeout 120 $bin attention --selftest --cases "device count" > "$OUT/selftest-fwd.txt" 2>&1
echo "fwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd.txt")" | tee "$OUT/summary.txt"
timeout 120 $bin attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
for suite in forward backward; do
  flag=(); [ $suite = backward ] && flag=(--backward)
  for tool in memcheck synccheck racecheck; do
    log=$OUT/san-$suite-$tool.txt
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention "${flag[@]}" --selftest --cases "device count" > "$log" 2>&1
    rc=$?
    echo "$suite $tool rc=$rc pass=$(grep -c '^PASS' "$log") fail=$(grep -c '^FAIL' "$log") $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)" | tee -a "$OUT/summary.txt"
  done
done
grep -E "^FAIL" "$OUT"/selftest-*.txt | head -10
grep -E "FAIL:|ERROR:" "$OUT/pytests.txt" | head -10
