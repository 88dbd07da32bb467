#!/usr/bin/env bash
# Call 7: the tile-list forward rows at HEAD beside FlexAttention (the rows 4e020bb and d5a71b6 changed, FA4
# cannot express them) and the new head-dim-64 random 50% row, on the lent H200: Python op, CLI, Flex.
set -uo pipefail
source bench/suite/device_env.sh
name=k32h
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
site=$(fm_install .carry/$name)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
only='^fwd[.]((s16384|s4096)[.](none|random50|random10|blocksparse10|topk8)|s8192[.](none|random50)|d64[.]s16384[.](none|random50))$'
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-lists-h200.jsonl"
timeout 540 python3 bench/suite/run.py --isolate --only "$only" --site "$site" \
    --systems fragmask,fragmask_cli,flex --commit "$commit" --bin "/tmp/$name/fragmask" \
    --output "$out" --budget-s 480 2>&1 | tail -20
echo "== $(grep -c '"status": "ok"' "$out") ok rows"
