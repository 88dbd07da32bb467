#!/usr/bin/env bash
# Call 3: call 2 again after its fixes (the selftest cases' mask heads, the shared-K/V tile's
# exemption, the Python test's split-plan comparison): the "device count" selftest cases,
# compute-sanitizer on them, and the Python GPU packer and deterministic tests.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k39b/fm.xz B "$(cat .carry/k39b/COMMIT)"
site=$(fm_install .carry/k39b)
bin=/tmp/B/fragmask
timeout 120 $bin attention --selftest --cases "device count" > "$OUT/selftest-fwd.txt" 2>&1
echo "fwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd.txt")" | tee "$OUT/summary.txt"
timeout 120 $bin attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 150 python3 -m unittest test_gpu.GpuPackerTests test_gpu.DeterministicBackwardTests test_gpu.FastPathAndPlanTests) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee -a "$OUT/summary.txt"
for suite in forward backward; do
  flag=(); [ $suite = backward ] && flag=(--backward)
  for tool in memcheck synccheck racecheck; do
    log=$OUT/san/$suite-$tool.txt; mkdir -p $OUT/san
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention "${flag[@]}" --selftest --cases "device count" > "$log" 2>&1
    rc=$?
    echo "$suite $tool rc=$rc pass=$(grep -c '^PASS' "$log") fail=$(grep -c '^FAIL' "$log") $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)" | tee -a "$OUT/summary.txt"
  done
done
(cd $OUT/san && tar czf ../san.tgz . && cd .. && rm -rf san)
grep -E "^FAIL" "$OUT"/selftest-*.txt | head -20
grep -E "FAIL:|ERROR:|Error" "$OUT/pytests.txt" | head -10
