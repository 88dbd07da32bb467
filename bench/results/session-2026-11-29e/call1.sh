#!/usr/bin/env bash
# The deterministic rank computed under the step's GEMMs (branch h/det-rank-ahead, built into
# .carry/k36i) against a612346 (.carry/k36h): the deterministic selftest, then det_pairs.py.
# Untimed when written (thirty-sixth session: no device time left). Carry both folders.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k36h/fm.xz A "$(cat .carry/k36h/COMMIT)"
fm_unxz .carry/k36i/fm.xz B "$(cat .carry/k36i/COMMIT)"
timeout 200 /tmp/B/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-det-B.txt" 2>&1
echo "B selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det-B.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det-B.txt")"
NONDET=0 timeout 380 python3 bench/results/session-2026-11-29d/det_pairs.py 2 /tmp/A/fragmask /tmp/B/fragmask | tee "$OUT/det_pairs.txt"
