#!/usr/bin/env bash
# The project's test command (README, .ci/run). Installs what the tests need into
# ./.cache on a fresh machine (pip CUDA compile toolchain: NVRTC, ptxas, cuobjdump,
# nvdisasm; pycute for the layout cross-check; a Python venv with maturin, numpy and
# safetensors), then runs every test of the workspace and of the Python package.
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

# The interpreter of the tests that run Python with numpy and safetensors (the numpy
# decoders of docs/masks.md). Without python3 they print SKIPPED, except under CI=true,
# where they fail.
if command -v "${PYTHON:-python3}" >/dev/null 2>&1; then
    FRAGMASK_TEST_PYTHON="$(scripts/install-pyenv.sh | tail -n 1)"
    export FRAGMASK_TEST_PYTHON
fi

cargo test --workspace --locked "$@"

# The Python package (crates/python): build it and run its CPU tests. After the Rust
# tests, which build target/debug/fragmask (a test loads a file the CLI wrote).
scripts/test-python.sh
