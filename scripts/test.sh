#!/usr/bin/env bash
# The project's test command (README, .ci/run). Installs what the tests need into
# ./.cache on a fresh machine (pip CUDA compile toolchain: NVRTC, ptxas, cuobjdump,
# nvdisasm; pycute for the layout cross-check), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

scripts/install-cuda-toolchain.sh
# shellcheck disable=SC1091
source "${FRAGMASK_CUDA_HOME:-$repo/.cache/cuda-toolchain}/env.sh"
scripts/install-pycute.sh
export FRAGMASK_PYCUTE_PATH="${FRAGMASK_PYCUTE_PATH:-$repo/.cache/py}"

cargo test --workspace --locked "$@"
