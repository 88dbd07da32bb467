#!/usr/bin/env bash
# The fix of an asked-for split tail on a call the planner would split or run persistent
# (.carry/i29: the build with it): the two tail cases of cli_cases.sh (which the HEAD build
# refused: "not with 4 splits") under the three sanitizers in both output layouts, the
# selftest's tail cases, and which kernel the long head-dim-64 row picks by default.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/i29/fm.xz i29 "$(cat .carry/i29/COMMIT)"
B=/tmp/i29/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for call in "--random 1,3,3,1000,1100,64 --tail 3,2" "--random 1,2,2,700,900,128 --synthetic-mask random:0.5 --tail 2,3" \
            "--random 2,6,3,400,400,128 --causal --tail-split on" "--random 1,2,2,2000,2000,128 --window 128,0 --tail-split on"; do
    $B attention $call > $OUT/call.txt 2>&1; echo "[$call] rc $? $(grep -E '^error|kernel|tiles visited' $OUT/call.txt | head -2 | tr '\n' ' ')"
done
CASES='^fwd-(d64-tail|tail-random50)$' timeout 120 bash bench/suite/sanitize.sh /tmp/i29 > $OUT/san_bhsd.txt 2>&1
cp $OUT/sanitize/summary.txt $OUT/summary_bhsd.txt
CASES='^fwd-(d64-tail|tail-random50)$' LAYOUT=bshd timeout 120 bash bench/suite/sanitize.sh /tmp/i29 > $OUT/san_bshd.txt 2>&1
cp $OUT/sanitize/summary.txt $OUT/summary_bshd.txt
rm -rf $OUT/sanitize
timeout 200 $B attention --selftest --cases tail > $OUT/selftest-tail.txt 2>&1
echo "selftest tail: rc $? $(grep -c '^PASS' $OUT/selftest-tail.txt) passed, $(grep -c '^FAIL' $OUT/selftest-tail.txt) failed; $(tail -1 $OUT/selftest-tail.txt)"
$B attention --random 1,16,16,16384,16384,64 --bench --json --iters 5 --warmup 2 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print("default D=64 S=16384:", "tail_split: true" in j["kernel"], j["ms_median"])'
cat $OUT/summary_bhsd.txt $OUT/summary_bshd.txt
