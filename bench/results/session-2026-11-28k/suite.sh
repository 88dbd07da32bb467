#!/usr/bin/env bash
# Issue 24's rows beside every peer at f9c3ef0 (the PV wait pinned on the max) on the lent H200, one shard per device
# call; `suite.sh install` only unpacks the build (SDPA and Flex's FA4 backend left out for time), after fa4_install.sh of every folder of bench/suite/fa4_parts.py: bash suite.sh I/N
set -uo pipefail
source bench/suite/device_env.sh
# The build rides along once (.carry/h30: fm.xz, the wheel, COMMIT); /tmp keeps it while the machine is warm.
if [ -f .carry/h30/COMMIT ]; then
    commit=$(cat .carry/h30/COMMIT)
    [ -x /tmp/h30/fragmask ] || fm_unxz .carry/h30/fm.xz h30 "$commit"
    site=$(fm_install .carry/h30)
else
    commit=$(cat /tmp/h30/COMMIT)
    site=/tmp/fm_suite-$commit
fi
[ "${1:-}" = install ] && { echo "installed $commit in /tmp/h30 and $site"; exit 0; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
only='^(fwd)[.](s16384[.](none|causal|window1024|docs12|random50)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal|wu002[.]blocks(10|50))$'
shard=${1:?shard I/N}
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-issue24-fwd-h200-${shard/\//of}.jsonl"
timeout 560 python3 bench/suite/run.py --isolate --only "$only" --shard "$shard" --site "$site" \
    --systems fragmask,fragmask_cli,flex,fa4,fa4_varlen --commit "$commit" --bin /tmp/h30/fragmask --fa4 /tmp/fa4site --output "$out" --budget-s ${BUDGET_S:-420} 2>&1 | tail -40
echo "== $(grep -c '"status": "ok"' "$out") ok rows"
