#!/usr/bin/env bash
# Call 1: branches h/det-writer + h/det-walk merged (h/det-both, k42a): the backward selftest's
# deterministic cases, the deterministic variants A/B (one binary, flags), then sanitizers.
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29j
fm_unxz .carry/k42a/fm.xz B "$(cat .carry/k42a/COMMIT)"
F=/tmp/B/fragmask
timeout 150 $F attention --backward --selftest --cases "deterministic" > "$OUT/selftest-det.txt" 2>&1; echo "selftest rc=$?"
grep -c "^PASS" "$OUT/selftest-det.txt"; grep "^FAIL" "$OUT/selftest-det.txt" | head -5; tail -2 "$OUT/selftest-det.txt"
timeout 300 python3 $D/detvar.py $F "$OUT/detvar.jsonl" 2 > "$OUT/detvar.txt" 2>"$OUT/detvar.err"; echo "detvar rc=$?"; head -c 1500 "$OUT/detvar.err"
cat "$OUT/detvar.txt"
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [128x128] block-sparse 3 heads" "deterministic no mask gqa 2"; do
    tag=$(echo $c | cut -c15-26 | tr -c 'a-z0-9' '_')
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --backward --selftest --cases "$c" > "$OUT/san-$tool-$tag.txt" 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/san-$tool-$tag.txt | tail -1)"
  done
done
