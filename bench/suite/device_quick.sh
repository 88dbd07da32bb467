#!/usr/bin/env bash
# The quick list (every row of README's performance block) on the GPU machine, in one device
# call: --budget-s stops starting workloads after BUDGET_S (450) s and reports the rest as
# skipped rows, so the call stays under 8 minutes. Each workload runs in its own process
# (--isolate): a peer that kills its CUDA context (FlexAttention's FA4 backend did, with an
# illegal address on dec.mask.wu002.blocks10) fails its own rows only.
#
#   bash bench/suite/device_quick.sh [BUILD]
#
# BUILD (default .carry/suite/build): fragmask-*.whl, the `fragmask` binary and COMMIT.
# FlashAttention-4 is used when /tmp/fa4site holds it. Result: $OUT/suite-DATE-TIME-COMMIT-quick.jsonl.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-.carry/suite/build}
source bench/suite/device_env.sh
site=$(fm_install "$build") || { echo "cannot install the wheel of $build"; exit 1; }
commit=$(cat "$build/COMMIT" 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-quick.jsonl"
args=(--isolate --quick --site "$site" --commit "$commit" --output "$out" --budget-s "${BUDGET_S:-450}")
[ -x "$build/fragmask" ] && args+=(--bin "$build/fragmask")
t0=$(date +%s)
timeout $(( ${BUDGET_S:-450} + 60 )) python3 bench/suite/run.py "${args[@]}" 2>&1 | tail -80
echo "== quick list: $(( $(date +%s) - t0 )) s, $(grep -c '"status": "ok"' "$out") ok rows; not ok:"
grep -ho '"system": "[a-z_0-9]*", "status": "\(failed\|skipped\)"' "$out" | sort | uniq -c
