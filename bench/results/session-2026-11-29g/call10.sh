#!/usr/bin/env bash
# Call 10: the static deterministic dense kernel reading its entries (k39g) against 0728792
# (k39f, computing them): the CLI's host-packed deterministic random 50% row, interleaved ABBA
# pairs; the backward selftest's deterministic cases and compute-sanitizer on the dense one.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k39f/fm.xz F "$(cat .carry/k39f/COMMIT)"
fm_unxz .carry/k39g/fm.xz G "$(cat .carry/k39g/COMMIT)"
bin=/tmp/G/fragmask
timeout 100 $bin attention --backward --selftest --cases deterministic > "$OUT/selftest-det.txt" 2>&1
echo "bwd det selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det.txt")" | tee "$OUT/summary.txt"
for tool in memcheck synccheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention --backward --selftest --cases "deterministic [128x128] random" > "$OUT/san-$tool.txt" 2>&1
  echo "det dense $tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
timeout 150 python3 bench/suite/run.py --ab /tmp/F /tmp/G --interleave --rounds 4 --only '^bwd[.]s16384[.](random50[.]det|none[.]det)$' --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?"; rm -rf "$OUT"/ab-*-rounds; grep -E "^\| bwd" "$OUT/ab.log"
