#!/usr/bin/env bash
# Call 2: the deterministic sections at B's default (k41c) against f0ca87f (k41a): CLI A/B of
# the deterministic rows, the backward selftest's deterministic cases, sanitizers on the two
# new multi-plane cases, and the Python GPU suite on B's wheel (the capture fix).
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29i
fm_unxz .carry/k41a/fm.xz A f0ca87f; fm_unxz .carry/k41c/fm.xz B "$(cat .carry/k41c/COMMIT)"
F=/tmp/B/fragmask
timeout 120 $F attention --backward --selftest --cases "deterministic" > "$OUT/selftest-det.txt" 2>&1; echo "selftest rc=$?"
grep -c "^PASS" "$OUT/selftest-det.txt"; grep "^FAIL" "$OUT/selftest-det.txt" | head -5; tail -2 "$OUT/selftest-det.txt"
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [128x128] block-sparse 3 heads" "deterministic causal gqa 2, 3 KV heads"; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --backward --selftest --cases "$c" > "$OUT/san-$tool-$(echo $c | cut -c15-22 | tr -c 'a-z0-9' '_').txt" 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/san-$tool-*$(echo $c | cut -c15-22 | tr -c 'a-z0-9' '_')*.txt | tail -1)"
  done
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 $F attention --backward --selftest --cases "device count deterministic" > "$OUT/san-memcheck-devcount.txt" 2>&1; echo "memcheck device count det rc=$?"
timeout 220 python3 $D/detab.py /tmp/A/fragmask $F "$OUT/detab.jsonl" 2 > "$OUT/detab.txt" 2>&1; echo "detab rc=$?"; cat "$OUT/detab.txt" | tail -12
site=$(fm_install .carry/k41c)
(cd crates/python/tests && PYTHONPATH=$site timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
