#!/usr/bin/env bash
# A/B of two fragmask builds on the GPU machine: fragmask's rows only, the two builds in
# alternating subprocesses, ROUNDS rounds (order flipped each round); per-row ratio B/A with
# its spread over rounds. One shard of the list per device call.
#
#   bash bench/suite/device_ab.sh BUILD_A BUILD_B 1/3 [ROUNDS]
#   bash bench/suite/device_ab.sh BUILD_A BUILD_B quick [ROUNDS]
#
# A build folder holds fragmask-*.whl (maturin build --release of crates/python at that
# commit), optionally the `fragmask` binary and COMMIT (the commit's short hash).
set -uo pipefail
cd "$(dirname "$0")/../.."
a=${1:?usage: device_ab.sh BUILD_A BUILD_B SHARD|quick [ROUNDS]}
b=${2:?usage: device_ab.sh BUILD_A BUILD_B SHARD|quick [ROUNDS]}
which=${3:-quick}
rounds=${4:-3}
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
sel=(--quick)
[ "$which" != quick ] && sel=(--shard "$which")
timeout 540 python3 bench/suite/run.py --ab "$a" "$b" --rounds "$rounds" "${sel[@]}" --out "$OUT" 2>&1 | tail -120
