#!/usr/bin/env bash
# Call 3: the rows where call 2's vector-register entries (k35b) ran faster or mixed, 4 more ABBA pairs:
# head dim 256's list kernels (128x128 serial, 128x80) and write-up 002's one-block 64x64 rows.
set -uo pipefail
source bench/suite/device_env.sh
for n in k35a k35b; do fm_unxz .carry/$n/fm.xz $n "$(cat .carry/$n/COMMIT)"; done
SECONDS=0
timeout 500 python3 bench/suite/run.py --ab /tmp/k35a /tmp/k35b --interleave --rounds 4 --systems fragmask_cli \
  --only '^fwd[.](d256[.]s16384[.](random50|topk8|blocksparse10)|d256[.]s4096[.]blocksparse10|wu002[.]blocks(10|50)v?)$' \
  --out $OUT/ab --budget-s 480 2>&1 | grep -E "^\|" | cut -c1-140
echo "ab ${SECONDS}s"
