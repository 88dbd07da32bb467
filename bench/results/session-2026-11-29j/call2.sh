#!/usr/bin/env bash
# Call 2: h/det-both at 9eb61c2 (k42b: the writer split within the block's 504 x 128 launch
# registers). A hang guard first, then the selftest's deterministic cases, the variants A/B
# (detvar.py), and sanitizers on two writer cases.
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29j
fm_unxz .carry/k42b/fm.xz B "$(cat .carry/k42b/COMMIT)"
F=/tmp/B/fragmask
timeout 40 $F bench backward --random 1,16,16,16384,16384,128 --deterministic --json --warmup 2 --iters 5 > "$OUT/guard.txt" 2>&1
rc=$?; echo "guard rc=$rc"; tail -c 400 "$OUT/guard.txt"; [ $rc -eq 0 ] || exit 1
timeout 120 $F attention --backward --selftest --cases "deterministic" > "$OUT/selftest-det.txt" 2>&1; echo "selftest rc=$?"
grep -c "^PASS" "$OUT/selftest-det.txt"; grep "^FAIL" "$OUT/selftest-det.txt" | head -5; tail -2 "$OUT/selftest-det.txt"
timeout 250 python3 $D/detvar.py $F "$OUT/detvar.jsonl" 2 > "$OUT/detvar.txt" 2>"$OUT/detvar.err"; echo "detvar rc=$?"; head -c 1500 "$OUT/detvar.err"
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [128x128] block-sparse 3 heads" "deterministic no mask gqa 2"; do
    tag=$(echo $c | cut -c15-26 | tr -c 'a-z0-9' '_')
    timeout 35 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --backward --selftest --cases "$c" > "$OUT/san-$tool-$tag.txt" 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/san-$tool-$tag.txt | tail -1)"
  done
done
cat "$OUT/detvar.txt"
