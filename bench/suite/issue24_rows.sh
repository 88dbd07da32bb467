#!/usr/bin/env bash
# Issue 24's rows beside FlashAttention-4 and Flex on a lent GPU, one shard per device call,
# after `fa4_install.sh` of every folder of bench/suite/fa4_parts.py (SDPA and Flex's FA4
# backend left out for time):
#
#   bash bench/suite/issue24_rows.sh CARRY install        # unpack .carry/CARRY (fm.xz, the wheel, COMMIT)
#   bash bench/suite/issue24_rows.sh CARRY I/N [fwd|bwd]   # shard I of N; fwd or bwd: only those rows
#
# The build rides along once; /tmp/CARRY keeps it while the machine is warm. BUDGET_S caps the shard.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/suite/device_env.sh
name=${1:?usage: issue24_rows.sh CARRY install|I/N [fwd|bwd]}
if [ -f ".carry/$name/COMMIT" ]; then
    commit=$(cat ".carry/$name/COMMIT")
    [ -x "/tmp/$name/fragmask" ] || fm_unxz ".carry/$name/fm.xz" "$name" "$commit"
    site=$(fm_install ".carry/$name")
else
    commit=$(cat "/tmp/$name/COMMIT")
    site=/tmp/fm_suite-$commit
fi
[ "${2:-}" = install ] && { echo "installed $commit in /tmp/$name and $site"; exit 0; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
families=${3:-fwd|bwd}
only="^($families)[.](s16384[.](none|causal|window1024|docs12|random50)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal|wu002[.]blocks(10|50))$"
shard=${2:?shard I/N}
tag=issue24${3:+-$3}
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print tolower($NF)}')
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-$tag-$device-${shard/\//of}.jsonl"
timeout 560 python3 bench/suite/run.py --isolate --only "$only" --shard "$shard" --site "$site" \
    --systems fragmask,fragmask_cli,flex,fa4,fa4_varlen --commit "$commit" --bin "/tmp/$name/fragmask" \
    --fa4 /tmp/fa4site --output "$out" --budget-s "${BUDGET_S:-420}" 2>&1 | tail -40
echo "== $(grep -c '"status": "ok"' "$out") ok rows"
