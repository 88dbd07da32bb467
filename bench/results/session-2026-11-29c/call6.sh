#!/usr/bin/env bash
# Call 6 (FA4 installed by calls 4 and 5): issue 24's FA4-comparable backward rows at HEAD (e0931f3) beside FA4.
set -uo pipefail
source bench/suite/device_env.sh
SECONDS=0
[ -d /tmp/fa4site/flash_attn ] || { echo "fa4 not installed: the machine went cold"; exit 1; }
echo "fa4 install ${SECONDS}s"
FAMILY=${FAMILY:-bwd}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
only="^($FAMILY)[.](s16384[.](none|causal|window1024|docs12)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal)$"
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-e0931f3-issue24-fa4-$FAMILY-h200.jsonl"
timeout ${LIMIT_S:-500} python3 bench/suite/run.py --isolate --only "$only" --site /tmp/fm_suite-e0931f3 \
  --systems ${SYSTEMS:-fragmask,fragmask_cli,fa4,fa4_varlen} --commit e0931f3 --bin /tmp/k35a/fragmask \
  --fa4 /tmp/fa4site --output "$out" --budget-s ${BUDGET_S:-470} 2>&1 | tail -30
echo "== $(grep -c '"status": "ok"' "$out") ok rows, ${SECONDS}s"
