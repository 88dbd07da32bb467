#!/usr/bin/env bash
# The split tail's checks (GPU machine, repository root; HEAD's binary as /tmp/A/fragmask, the
# change's as /tmp/B/fragmask): the selftest's tail, split and bshd cases, the three sanitizers on
# two tail calls, which kernel the default picks on the long rows, and an interleaved A/B of the
# rows where the planner takes the tail.
source bench/suite/device_env.sh
B=/tmp/B/fragmask
for c in tail split "bshd O"; do
    $B attention --selftest --cases "$c" > "$OUT/selftest-${c// /_}.txt" 2>&1
    echo "selftest '$c': rc $? $(grep -ciE 'fail' "$OUT/selftest-${c// /_}.txt") lines with 'fail'; $(tail -1 "$OUT/selftest-${c// /_}.txt")"
done
for tool in memcheck racecheck synccheck; do
    for call in "--random 1,4,2,700,900,128 --tail 5,2" "--random 2,2,2,1000,1000,64 --causal --tail 7,3"; do
        # shellcheck disable=SC2086
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $B attention $call --bench --warmup 0 --iters 1 > "$OUT/san.txt" 2>&1
        echo "$tool [$call]: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san.txt" | tail -1)"
    done
done
for shape in 1,16,16,16384,16384,64 1,16,16,16384,16384,128 1,16,16,16384,16384,256; do
    $B attention --random $shape --bench --json --iters 5 --warmup 2 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(j["shape"], "tail_split: true" in j["kernel"], j["ms_median"])'
done
python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 3 --systems fragmask_cli \
    --only '^fwd[.](s16384[.](none|random50|topk8)|d64[.]s16384[.]none|d256[.]s16384[.](none|random50))$' --out "$OUT/ab" 2>&1 | tail -14
