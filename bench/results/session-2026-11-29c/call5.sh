#!/usr/bin/env bash
# Call 5: FlashAttention-4 part 2 of 2, then issue 24's FA4-comparable forward rows at HEAD (e0931f3) beside FA4.
set -uo pipefail
source bench/suite/device_env.sh
SECONDS=0
bash bench/suite/fa4_install.sh .carry/fa4xz/p2 || exit 1
echo "fa4 install ${SECONDS}s"
FAMILY=${FAMILY:-fwd}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
only="^($FAMILY)[.](s16384[.](none|causal|window1024|docs12)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal)$"
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-e0931f3-issue24-fa4-$FAMILY-h200.jsonl"
timeout ${LIMIT_S:-500} python3 bench/suite/run.py --isolate --only "$only" --site /tmp/fm_suite-e0931f3 \
  --systems fragmask,fragmask_cli,fa4,fa4_varlen --commit e0931f3 --bin /tmp/k35a/fragmask \
  --fa4 /tmp/fa4site --output "$out" --budget-s ${BUDGET_S:-470} 2>&1 | tail -30
echo "== $(grep -c '"status": "ok"' "$out") ok rows, ${SECONDS}s"
