#!/usr/bin/env bash
# On the CPU machine, before bench/split7_gpu_run.sh: builds main (the split-KV forward) into
# .carry/main/fragmask with the NVRTC cubins of every attention and decode kernel variant
# (tests/attention_compile.rs, tests/decode_compile.rs) in .carry/cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-cuda-toolchain.sh
# shellcheck disable=SC1091
source "${FRAGMASK_CUDA_HOME:-$PWD/.cache/cuda-toolchain}/env.sh"
rm -rf .carry && mkdir -p .carry/main .carry/cache
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache CI=true
cargo build --release --locked
strip -o .carry/main/fragmask target/release/fragmask
cargo test --release --locked --test attention_compile --test decode_compile
du -sh .carry
