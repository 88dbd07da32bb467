#!/usr/bin/env bash
# Call 1: the deterministic backward of b72e718 (B) against e0931f3 (A): selftest of the
# deterministic cases, then interleaved timings (det_pairs.py).
set -u
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29d
fm_unxz .carry/k35a/fm.xz A e0931f3
fm_unxz .carry/k36a/fm.xz B "$(cat .carry/k36a/COMMIT)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 240 /tmp/B/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-det.txt" 2>&1
echo "selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det.txt")"
grep -E '^(FAIL|PASS)' "$OUT/selftest-det.txt" | cut -c1-150
timeout 400 python3 $D/det_pairs.py /tmp/A/fragmask /tmp/B/fragmask 2 | tee "$OUT/det_pairs.txt"
