#!/usr/bin/env bash
# The cost of the last partial wave (GPU machine, repository root; a HEAD binary as /tmp/A/fragmask).
# Equal-work grids: the full call, the same per-CTA work on a grid of whole waves (132 SMs, one CTA
# each), and the tail's CTAs alone, whole or split-KV. Round-robin, 3 rounds, kernel medians.
source bench/suite/device_env.sh
F=/tmp/A/fragmask
rows() { cat <<'ROWS'
d64.full      --random 1,16,16,16384,16384,64
d64.main      --random 1,12,12,21120,16384,64
d64.tail      --random 1,1,1,10752,16384,64
d64.tail.s2   --random 1,1,1,10752,16384,64 --splits 2
d128.full     --random 1,16,16,16384,16384,128
d128.main     --random 1,15,15,16896,16384,128
d128.tail     --random 1,1,1,8704,16384,128
d128.tail.s2  --random 1,1,1,8704,16384,128 --splits 2
d128.tail.s3  --random 1,1,1,8704,16384,128 --splits 3
bwd.full      --backward --random 1,16,16,16384,16384,128
bwd.main      --backward --random 1,15,15,16384,16896,128
bwd.tail      --backward --random 1,1,1,16384,8704,128
ROWS
}
for r in 1 2 3; do
    rows | while read -r tag args; do
        # shellcheck disable=SC2086
        ms=$($F attention $args --bench --json --warmup 10 --iters 30 2>>"$OUT/tail.err" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["ms_median"])' 2>>"$OUT/tail.err")
        echo "$r $tag $ms" | tee -a "$OUT/tail.txt"
    done
done > /dev/null
python3 - "$OUT/tail.txt" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, tag, ms = line.split()
    try: d[tag].append(float(ms))
    except ValueError: pass
for tag, v in d.items():
    print(f"{tag:14s} {statistics.median(v):8.4f} ms  ({' '.join(f'{x:.4f}' for x in v)})")
PY
