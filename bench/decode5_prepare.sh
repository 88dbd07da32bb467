#!/usr/bin/env bash
# On the CPU machine, before the device call of bench/decode5_gpu_run.sh: builds the two
# binaries of the lean-key-loop A/B (docs/decode.md, "Not done") into .carry/
#   cl/fragmask   - main as it is (decode::LEAN_LOOP off)
#   lean/fragmask - the same source built with FRAGMASK_DECODE_LEAN_LOOP=1
# and fills .carry/cache with the NVRTC cubins of every decode geometry of the sweep, both
# ways (tests/decode_compile.rs), so the device compiles no decode kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-cuda-toolchain.sh
# shellcheck disable=SC1091
source "${FRAGMASK_CUDA_HOME:-$PWD/.cache/cuda-toolchain}/env.sh"
mkdir -p .carry/cl .carry/lean .carry/cache
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
cargo build --release --locked
strip -o .carry/cl/fragmask target/release/fragmask
FRAGMASK_DECODE_LEAN_LOOP=1 cargo build --release --locked
strip -o .carry/lean/fragmask target/release/fragmask
FRAGMASK_DECODE_LEAN_LOOP=1 cargo test --release --locked --test decode_compile
cargo build --release --locked   # leave target/ at the default build
cmp -s .carry/cl/fragmask .carry/lean/fragmask && { echo "error: the two binaries are identical" >&2; exit 1; }
du -sh .carry
