#!/usr/bin/env bash
# Call 3: is the rotated walk worth its co-residency assumption? One binary (main 07d4ffc plus a
# probe: the rotation only with FM_PROBE_ROTATE set), A = rotated (wrapper sets it), B = the
# countdown. det_pairs.py, 3 interleaved rounds. Then compute-sanitizer on main's deterministic
# kernels (the 32-bit rank), rotation on.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k37b/fm.xz P probe
mkdir -p /tmp/R && printf '#!/bin/sh\nFM_PROBE_ROTATE=1 exec /tmp/P/fragmask "$@"\n' > /tmp/R/fragmask && chmod +x /tmp/R/fragmask
FM_PROBE_ROTATE=1 timeout 100 /tmp/P/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-rot.txt" 2>&1
echo "rotated selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-rot.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-rot.txt")"
timeout 100 /tmp/P/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-countdown.txt" 2>&1
echo "countdown selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-countdown.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-countdown.txt")"
NONDET=0 timeout 200 python3 bench/results/session-2026-11-29d/det_pairs.py 3 /tmp/R/fragmask /tmp/P/fragmask | tee "$OUT/det_pairs.txt"
run() {  # TOOL LIMIT CASES
  local log="$OUT/san-$1-$(printf '%s' "$3" | tr -c 'A-Za-z0-9' '_' | cut -c1-40).txt"
  SECONDS=0
  FM_PROBE_ROTATE=1 timeout "$2" compute-sanitizer --tool "$1" --error-exitcode 99 /tmp/P/fragmask attention --backward --selftest --cases "$3" > "$log" 2>&1
  echo "$1 '$3' rc=$? pass=$(grep -c '^PASS' "$log") fail=$(grep -c '^FAIL' "$log") ${SECONDS}s $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)"
}
run memcheck 110 deterministic
run synccheck 110 deterministic
run racecheck 60 "deterministic no mask x10"
run racecheck 60 "deterministic sliding window"
