#!/usr/bin/env bash
# Call 3: k40c (the CLI's --tile-order, a transposed-packer case over 256 key blocks): the
# GPU packer check and its sanitizers with that case; the tile order's own effect through
# the CLI (one binary, --tile-order off against the default, interleaved ABBA pairs) on the
# mask rows; the backward selftest's block-sparse and random cases.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k40c/fm.xz N "$(cat .carry/k40c/COMMIT)"
F=/tmp/N/fragmask
timeout 150 $F verify --packer-only > "$OUT/verify.txt" 2>&1
echo "verify rc=$? pass=$(grep -c 'PASS' "$OUT/verify.txt") fail=$(grep -c 'FAIL' "$OUT/verify.txt")" | tee "$OUT/summary.txt"
grep -E "20000|17000" "$OUT/verify.txt" | head -4
for tool in memcheck racecheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 $F verify --packer-only --sanitizer-friendly > "$OUT/san-verify-$tool.txt" 2>&1
  echo "verify $tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-verify-$tool.txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
timeout 120 $F attention --backward --selftest --cases "random" > "$OUT/selftest-bwd.txt" 2>&1
echo "bwd selftest random rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-bwd.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-bwd.txt")" | tee -a "$OUT/summary.txt"
timeout 200 python3 -m bench.suite.flag_pairs $F '^bwd[.]s16384[.](blocksparse10|topk8)$|^bwd[.]wu002[.]blocks10$' 3 "--tile-order off" > "$OUT/tile-order.txt" 2>&1
echo "flag pairs rc=$?" | tee -a "$OUT/summary.txt"
cat "$OUT/tile-order.txt" | tail -5
