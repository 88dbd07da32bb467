#!/usr/bin/env bash
# The whole workload list on the GPU machine, one shard per device call (each under 9
# minutes: --budget-s stops starting workloads after BUDGET_S (420) s and reports the rest as
# skipped; a workload still running then gets 60 s more, so the outer timeout never cuts in).
#
#   bash bench/suite/device_full.sh 1/4 [BUILD]     # then 2/4 ... 4/4, one device call each
#
# BUILD (default .carry/suite/build) holds fragmask-*.whl, the `fragmask` binary and COMMIT.
# FlashAttention-4 is used when /tmp/fa4site holds it (shared/peers/fa4/install-on-device.sh);
# otherwise its rows say "missing". Results: $OUT/suite-DATE-TIME-COMMIT-shardIofN.jsonl;
# copy them into bench/results/ and run bench/suite/report.py.
set -uo pipefail
cd "$(dirname "$0")/../.."
shard=${1:?usage: device_full.sh I/N [BUILD]}
build=${2:-.carry/suite/build}
source bench/suite/device_env.sh
site=$(fm_install "$build") || { echo "cannot install the wheel of $build"; exit 1; }
commit=$(cat "$build/COMMIT" 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
stamp=$(date -u +%Y-%m-%d-%H%M)
out="$OUT/suite-$stamp-$commit-shard${shard/\//of}.jsonl"
args=(--shard "$shard" --site "$site" --commit "$commit" --output "$out" --budget-s "${BUDGET_S:-420}")
[ -x "$build/fragmask" ] && args+=(--bin "$build/fragmask")
timeout $(( ${BUDGET_S:-420} + 90 )) python3 bench/suite/run.py --isolate "${args[@]}" 2>&1 | tail -150
echo "== $(grep -c '"status": "ok"' "$out") ok rows; not ok:"
grep -ho '"system": "[a-z_0-9]*", "status": "\(failed\|skipped\)"' "$out" | sort | uniq -c
