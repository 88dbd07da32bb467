#!/usr/bin/env bash
# One device call: write-up 002's backward (issue 13) with its lists packed on 64x64 tiles
# (the write-up's 64-token blocks: 64-key CTAs, every listed tile full) against the same
# lists on 128x128 tiles (every tile partial), each beside FlexAttention, in one run.
# Needs .carry/pdl/fragmask (ac45e59) and .carry/cache. Logs under $OUT.
set -uo pipefail
# shellcheck source=bench/device_env.sh
source bench/device_env.sh
FM=$C/pdl/fragmask
SECONDS=0
for tile in 64x64 128x128; do
  PYTHONUNBUFFERED=1 timeout 250 python3 bench/backward_bench.py --bin "$FM" --out "$OUT/$tile" \
    --workdir /tmp/fm_bwd_$tile --iters 20 --only video10 --video-block $tile > "$OUT/video_$tile.log" 2>&1
  echo "$tile done t=${SECONDS}s"
done
for tile in 64x64 128x128; do echo "== $tile"; sed -n '/^backward alone/,$p' "$OUT/video_$tile.log" | cut -c1-200; done
