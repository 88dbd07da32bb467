#!/usr/bin/env bash
# Call 3: B = the turn released one step late (k36b), D = the same with one release add per
# column group after the barrier instead of every consumer's __threadfence (k36d); nondet and
# nondet in the deterministic kernels' configuration (no dQ writer, grid order, no group slices).
set -u
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29d
fm_unxz .carry/k36b/fm.xz B "$(cat .carry/k36b/COMMIT)"
fm_unxz .carry/k36d/fm.xz D "$(cat .carry/k36d/COMMIT)"
timeout 200 /tmp/D/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-det-D.txt" 2>&1
echo "D selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det-D.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det-D.txt")"
grep -E '^FAIL' "$OUT/selftest-det-D.txt" | cut -c1-200
timeout 450 python3 $D/det_pairs.py 2 /tmp/B/fragmask /tmp/D/fragmask | tee "$OUT/det_pairs.txt"
