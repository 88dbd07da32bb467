#!/usr/bin/env bash
# Call 4: the rotated walk removed (B, the working tree after 07d4ffc) against 07d4ffc (A, .carry/k37a):
# B's deterministic selftest and compute-sanitizer, det_pairs.py (3 rounds, with B's non-deterministic
# time), then the Python GPU and torch tests on B's wheel.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k37a/fm.xz A "$(cat .carry/k37a/COMMIT)"
fm_unxz .carry/k37c/fm.xz B norotate
bin=/tmp/B/fragmask
timeout 100 $bin attention --backward --selftest --cases deterministic > "$OUT/selftest-det-B.txt" 2>&1
echo "B selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det-B.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det-B.txt")"
run() {  # TOOL LIMIT CASES
  local log="$OUT/san-$1-$(printf '%s' "$3" | tr -c 'A-Za-z0-9' '_' | cut -c1-40).txt"
  SECONDS=0
  timeout "$2" compute-sanitizer --tool "$1" --error-exitcode 99 $bin attention --backward --selftest --cases "$3" > "$log" 2>&1
  echo "$1 '$3' rc=$? pass=$(grep -c '^PASS' "$log") fail=$(grep -c '^FAIL' "$log") ${SECONDS}s $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)"
}
run memcheck 100 deterministic
run synccheck 100 deterministic
run racecheck 60 "deterministic no mask x10"
run racecheck 60 "deterministic causal x10"
run racecheck 60 "deterministic sliding window"
timeout 240 python3 bench/results/session-2026-11-29d/det_pairs.py 3 /tmp/A/fragmask /tmp/B/fragmask | tee "$OUT/det_pairs.txt"
site=$(fm_install .carry/k37c)
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 150 python3 -m unittest test_gpu test_torch > "$OUT/python-tests.txt" 2>&1; echo "python tests rc=$?"; tail -3 "$OUT/python-tests.txt")
