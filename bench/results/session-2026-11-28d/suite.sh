#!/usr/bin/env bash
# Issue 24's rows beside every peer, one shard per device call (after fa4_install.sh of
# every folder of bench/suite/fa4_parts.py): bash suite.sh I/N
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/a28/fragmask ] || fm_unxz .carry/a28/fm.xz a28 c9e626f
site=$(fm_install .carry/w27)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
only='^(fwd|bwd)[.](s16384[.](none|causal|window1024|docs12|random50)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal|wu002[.]blocks(10|50))$'
shard=${1:?shard I/N}
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-c9e626f-issue24-${shard/\//of}.jsonl"
timeout 540 python3 bench/suite/run.py --isolate --only "$only" --shard "$shard" --site "$site" \
    --commit c9e626f --bin /tmp/a28/fragmask --fa4 /tmp/fa4site --output "$out" --budget-s ${BUDGET_S:-400} 2>&1 | tail -40
echo "== $(grep -c '"status": "ok"' "$out") ok rows"
