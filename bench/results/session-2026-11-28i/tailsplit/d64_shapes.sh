#!/usr/bin/env bash
# Head dim 64's split tail on the shapes its default takes it (GPU machine; the binary as
# /tmp/B/fragmask): the default against --tail-split off, 4 ABBA pairs after 300 ms warm-up each,
# kernel medians; the default's tail from the plan (JSON kernel field).
source bench/suite/device_env.sh
B=/tmp/B/fragmask
t() { $B attention --random "$1" --bench --json --warmup 3 --warmup-ms 300 --iters 30 $2 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(j["ms_median"], "tail_split: true" in j["kernel"])'; }
for shape in 1,16,16,4096,4096,64 1,16,16,8192,8192,64 2,8,8,8192,8192,64 1,16,16,16384,16384,64 1,32,32,16384,16384,64 1,16,16,12000,12000,64; do
    r=""
    for p in 1 2 3 4; do
        if [ $((p % 2)) = 1 ]; then a=$(t $shape "--tail-split off"); b=$(t $shape ""); else b=$(t $shape ""); a=$(t $shape "--tail-split off"); fi
        r="$r ${a%% *}:${b%% *}:${b##* }"
    done
    python3 - "$shape" $r <<'PY'
import sys, statistics
shape, pairs = sys.argv[1], [p.split(':') for p in sys.argv[2:]]
ratios = [float(b) / float(a) for a, b, _ in pairs]
print(f"{shape:24s} off {statistics.median(float(a) for a,_,_ in pairs):.4f} ms  default {statistics.median(float(b) for _,b,_ in pairs):.4f} ms (tail {pairs[0][2]})  default/off {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
PY
done
