#!/usr/bin/env bash
# Call 2: the consumers' list entries read ahead into vector registers (k35b = e0931f3 + fm_lane_zero)
# against HEAD (k35a): O and lse byte for byte on the forward CLI cases; compute-sanitizer on the
# list cases; interleaved A/B (2 ABBA pairs) on every forward row whose kernel changed (the one-block
# tile lists) and the no-mask row.
set -uo pipefail
source bench/suite/device_env.sh
for n in k35a k35b; do fm_unxz .carry/$n/fm.xz $n "$(cat .carry/$n/COMMIT)"; done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SECONDS=0
timeout 120 bash bench/suite/same_outputs.sh /tmp/k35a/fragmask /tmp/k35b/fragmask 2>&1 | tail -4
echo "same_outputs ${SECONDS}s"
SECONDS=0
CASES='^fwd-(random50|gqa-blocksparse|d256-blocksparse|tail-random50|64tok-tail|64tok-persistent|splitkv)$' \
  timeout 150 bash bench/suite/sanitize.sh /tmp/k35b > $OUT/sanitize.txt 2>&1
echo "sanitize rc=$? ${SECONDS}s"; tail -22 $OUT/sanitize.txt | cut -c1-150
SECONDS=0
timeout 330 python3 bench/suite/run.py --ab /tmp/k35a /tmp/k35b --interleave --rounds 2 --systems fragmask_cli \
  --only '^(fwd[.]((s4096|s8192|s16384)[.](none|random50|random10|topk8|blocksparse10)|d64[.]s16384[.]random50|d256[.]s16384[.](random50|topk8|blocksparse10)|fp16[.]s16384[.]random50|wu002[.]blocks(10|50)[vp]?)|split[.]wu002[.]blocks(10|50))$' \
  --out $OUT/ab --budget-s 310 2>&1 | grep -E "^\|" | cut -c1-140
echo "ab ${SECONDS}s"
