#!/usr/bin/env bash
# On the CPU machine, before the device call of bench/decode6_gpu_run.sh: builds the two
# binaries of the QK-chain A/B (docs/decode.md, "Not done") into .carry/
#   base/fragmask - main as it is (one MMA chain per score tile, QK_CHAINS = 1)
#   ch2/fragmask  - the same source built with FRAGMASK_DECODE_QK_CHAINS=2 (a build-time
#                   knob of commit-time source; removed after this A/B showed no gain:
#                   docs/PERF.md, "Split-KV forward")
# and fills .carry/cache with the NVRTC cubins of every decode geometry of the sweep, both
# ways (tests/decode_compile.rs), so the device compiles no decode kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-cuda-toolchain.sh
# shellcheck disable=SC1091
source "${FRAGMASK_CUDA_HOME:-$PWD/.cache/cuda-toolchain}/env.sh"
rm -rf .carry && mkdir -p .carry/base .carry/ch2 .carry/cache
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
export CI=true  # the compile test fails rather than skips without NVRTC
cargo build --release --locked
strip -o .carry/base/fragmask target/release/fragmask
cargo test --release --locked --test decode_compile
FRAGMASK_DECODE_QK_CHAINS=2 cargo build --release --locked
strip -o .carry/ch2/fragmask target/release/fragmask
FRAGMASK_DECODE_QK_CHAINS=2 cargo test --release --locked --test decode_compile
cargo build --release --locked   # leave target/ at the default build
cmp -s .carry/base/fragmask .carry/ch2/fragmask && { echo "error: the two binaries are identical" >&2; exit 1; }
du -sh .carry
