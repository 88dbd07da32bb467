#!/usr/bin/env bash
# A/B of two fragmask builds on the GPU machine: fragmask's rows only, the two builds in
# alternating subprocesses, ROUNDS rounds (order flipped each round); per-row ratio B/A with
# its spread over rounds. One shard of the list per device call.
#
#   bash bench/suite/device_ab.sh BUILD_A BUILD_B 1/3 [ROUNDS]
#   bash bench/suite/device_ab.sh BUILD_A BUILD_B quick [ROUNDS]
#   bash bench/suite/device_ab.sh BUILD_A BUILD_B key [ROUNDS]   # the forward/backward regression rows
#   INTERLEAVE=1 bash bench/suite/device_ab.sh BUILD_A BUILD_B key [PAIRS]
#
# INTERLEAVE=1: the fragmask_cli rows only, each row's two binaries back to back in ABBA
# pairs (ROUNDS = pairs per row; run.py --interleave); rows that cannot interleave are listed.
#
# A build folder holds fragmask-*.whl (maturin build --release of crates/python at that
# commit) and/or the `fragmask` binary, and COMMIT (the commit's short hash). A binary-only
# build (a commit before crates/python) compares on the fragmask_cli rows (kernel times from
# `fragmask bench`); its Python rows are reported "not in both builds".
set -uo pipefail
cd "$(dirname "$0")/../.."
a=${1:?usage: device_ab.sh BUILD_A BUILD_B SHARD|quick [ROUNDS]}
b=${2:?usage: device_ab.sh BUILD_A BUILD_B SHARD|quick [ROUNDS]}
which=${3:-quick}
rounds=${4:-3}
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
key='^(fwd\.s16384\.(none|causal|window1024|docs12|random50)|bwd\.s16384\.(none|causal|window1024|docs12|random50)|fwd\.wu002\.blocks(10|50)|bwd\.wu002\.blocks10)$'
case $which in
    quick) sel=(--quick) ;;
    key) sel=(--only "$key") ;;
    *) sel=(--shard "$which") ;;
esac
mode=()
if [ "${INTERLEAVE:-0}" = 1 ]; then
    mode=(--interleave --systems fragmask_cli --budget-s 480)  # rows past the budget are listed as skipped
fi
timeout 540 python3 bench/suite/run.py --ab "$a" "$b" --rounds "$rounds" "${sel[@]}" ${mode[@]+"${mode[@]}"} --out "$OUT" 2>&1 | tail -120
