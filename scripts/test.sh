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
# Compiled kernels too stay in ./.cache during tests (the library's default is
# ~/.cache/fragmask/nvrtc; docs/reliability.md, "The NVRTC compile cache").
export FRAGMASK_CACHE_DIR="${FRAGMASK_CACHE_DIR:-$repo/.cache/nvrtc}"

# Property tests: under CI=true every run uses the same seed (the value of CI_SEED in
# tests/support/proptest_ci.rs, which applies it by itself too); locally the seed is
# random. docs/CONVENTIONS.md, "Property tests".
if [ "${CI:-}" = true ]; then
    export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-2316557904454746113}"
fi

cargo test --workspace --locked "$@"

# The Python package (crates/python): build it and run its CPU tests. After the Rust
# tests, which build target/debug/fragmask (a test loads a file the CLI wrote).
scripts/test-python.sh
