#!/usr/bin/env bash
# Session 2026-11-29f call 1: next/bwd-dense.sh of the 37th session with timeouts fitted to one 600 s call.
# The backward's dense tile lists (branch h/bwd-dense-lists, 1b3e480, built into .carry/k37e)
# against main's backward (.carry/k37d, ad66ae0; its backward kernels are 2ee5bb4's): the
# backward selftest's list and deterministic cases, compute-sanitizer on one dense case, then
# the list rows interleaved (non-deterministic with the CLI's A/B, deterministic with
# det_pairs.py). Untimed when written. Carry both folders.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k37d/fm.xz A "$(cat .carry/k37d/COMMIT)"
fm_unxz .carry/k37e/fm.xz B "$(cat .carry/k37e/COMMIT)"
for cases in "random" "deterministic"; do
  timeout 75 /tmp/B/fragmask attention --backward --selftest --cases "$cases" > "$OUT/selftest-$cases.txt" 2>&1
  echo "selftest '$cases' rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-$cases.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-$cases.txt")"
done
for tool in memcheck racecheck synccheck; do
  timeout 55 compute-sanitizer --tool $tool --error-exitcode 99 /tmp/B/fragmask attention --backward --selftest --cases "deterministic [128x128] random 50%" > "$OUT/san-$tool.txt" 2>&1
  echo "$tool rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$OUT/san-$tool.txt" | tail -1)"
done
timeout 160 python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 3 \
  --only '^bwd[.](s16384[.](random50|topk8|none)|s8192[.]random50)$' --out "$OUT" > "$OUT/ab.log" 2>&1
tail -8 "$OUT/ab.log"
NONDET=0 timeout 110 python3 bench/results/session-2026-11-29d/det_pairs.py 2 /tmp/A/fragmask /tmp/B/fragmask | tee "$OUT/det_pairs.txt"
