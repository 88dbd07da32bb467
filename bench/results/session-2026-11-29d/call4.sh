#!/usr/bin/env bash
# Call 4: A = one release after the barrier (k36d), B = plus this step's semaphore read ahead under
# its GEMMs, fence.acq_rel when the turn had come (k36e), C = the same without the fence (k36f).
set -u
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29d
fm_unxz .carry/k36d/fm.xz A "$(cat .carry/k36d/COMMIT)"
fm_unxz .carry/k36e/fm.xz B "$(cat .carry/k36e/COMMIT)"
fm_unxz .carry/k36f/fm.xz C "$(cat .carry/k36f/COMMIT)"
for b in B C; do
  timeout 200 /tmp/$b/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-det-$b.txt" 2>&1
  echo "$b selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det-$b.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det-$b.txt")"
  grep -E '^FAIL' "$OUT/selftest-det-$b.txt" | cut -c1-200
done
NONDET=0 timeout 400 python3 $D/det_pairs.py 2 /tmp/A/fragmask /tmp/B/fragmask /tmp/C/fragmask | tee "$OUT/det_pairs.txt"
