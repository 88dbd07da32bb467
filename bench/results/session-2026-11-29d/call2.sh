#!/usr/bin/env bash
# Call 2: the deterministic dQ turn released one step late (B = k36b) and, on top, the turn
# awaited under the step's first GEMMs (C = k36c), against b72e718 (A = k36a): selftest of the
# deterministic cases on both, then interleaved timings.
set -u
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29d
fm_unxz .carry/k36a/fm.xz A "$(cat .carry/k36a/COMMIT)"
fm_unxz .carry/k36b/fm.xz B "$(cat .carry/k36b/COMMIT)"
fm_unxz .carry/k36c/fm.xz C "$(cat .carry/k36c/COMMIT)"
for b in B C; do
  timeout 200 /tmp/$b/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-det-$b.txt" 2>&1
  echo "$b selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det-$b.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det-$b.txt")"
  grep -E '^FAIL' "$OUT/selftest-det-$b.txt" | cut -c1-200
done
timeout 420 python3 $D/det_pairs.py 2 /tmp/A/fragmask /tmp/B/fragmask /tmp/C/fragmask | tee "$OUT/det_pairs.txt"
