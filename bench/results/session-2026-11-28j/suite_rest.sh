#!/usr/bin/env bash
# The row suite.sh's first shard ran out of budget for (bwd.wu002.blocks10), at 50a45e2 on the
# same lent H200, without FA4 (it has no 64-token block mask).
set -uo pipefail
source bench/suite/device_env.sh
commit=$(cat .carry/h29/COMMIT)
[ -x /tmp/h29/fragmask ] || fm_unxz .carry/h29/fm.xz h29 "$commit"
site=$(fm_install .carry/h29)
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-issue24-h200-rest.jsonl"
timeout 400 python3 bench/suite/run.py --isolate --only '^bwd[.]wu002[.]blocks10$' --site "$site" \
    --systems fragmask,fragmask_cli,flex --commit "$commit" --bin /tmp/h29/fragmask --output "$out" 2>&1 | tail -12
echo "== $(grep -c '"status": "ok"' "$out") ok rows"
