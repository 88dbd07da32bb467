#!/usr/bin/env bash
# Call 9: the run-time check computing the deterministic rank alone (entries read): the backward's
# "device count" selftest cases and compute-sanitizer on them, then runtime_ab.py's
# deterministic rows (a mask left on the device against the same mask read back, 4 ABBA pairs).
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k39f/fm.xz F "$(cat .carry/k39f/COMMIT)"
site=$(fm_install .carry/k39f)
bin=/tmp/F/fragmask
timeout 60 $bin attention --backward --selftest --cases "device count" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee "$OUT/summary.txt"
for tool in memcheck synccheck racecheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention --backward --selftest --cases "device count" > "$OUT/san-bwd-$tool.txt" 2>&1
  echo "bwd $tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-bwd-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
PYTHONPATH=$site timeout 150 python3 bench/results/session-2026-11-29g/runtime_ab.py 4 'det$' 2>&1 | tee "$OUT/runtime_ab_det.txt"
c=$(cat .carry/k39f/COMMIT)
timeout 60 python3 bench/suite/run.py --isolate --site "$site" --bin $bin --commit "$c" \
  --systems fragmask,fragmask_cli --only '^bwd[.]s16384[.]random50[.]det$' \
  --output "$OUT/suite-$c-det-h200.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"; grep -E "^bwd" "$OUT/suite.log"
