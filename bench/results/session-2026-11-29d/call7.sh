#!/usr/bin/env bash
# Call 7: compute-sanitizer on a612346 (the pair mode's release barrier without .aligned), then the deterministic selftest.
set -uo pipefail
source bench/suite/device_env.sh
C=$(cat .carry/k36h/COMMIT)
fm_unxz .carry/k36h/fm.xz G "$C"
bin=/tmp/G/fragmask
run() {  # TOOL LIMIT CASES
  local log="$OUT/san-$1-$(printf '%s' "$3" | tr -c 'A-Za-z0-9' '_' | cut -c1-40).txt"
  SECONDS=0
  timeout "$2" compute-sanitizer --tool "$1" --error-exitcode 99 $bin attention --backward --selftest --cases "$3" > "$log" 2>&1
  echo "$1 '$3' rc=$? pass=$(grep -c '^PASS' "$log") fail=$(grep -c '^FAIL' "$log") ${SECONDS}s $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)"
}
run memcheck 110 deterministic
run synccheck 110 deterministic
run racecheck 70 "deterministic no mask x10"
run racecheck 70 "deterministic sliding window"
run racecheck 70 "deterministic [128x128] random 50% x10"
run racecheck 70 "dQ fragment-order atomics: deterministic"
run racecheck 70 "deterministic causal x10 d128"
timeout 100 $bin attention --backward --selftest --cases deterministic > "$OUT/selftest-det.txt" 2>&1
echo "selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det.txt")"
