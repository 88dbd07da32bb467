#!/usr/bin/env bash
# Local (no GPU): builds the base binary and one binary per prepared patch into .carry/next/<name>/
# (fragmask + COMMIT), for call.sh on the GPU machine. Run from the repository root.
set -euo pipefail
here=bench/results/session-2026-11-27o/next
source .cache/cuda-toolchain/env.sh
base=$(git rev-parse --short HEAD)
build() {   # build NAME [PATCH]
  local name=$1 patch=${2:-}
  [ -n "$patch" ] && git apply "$patch"
  cargo build --release --quiet
  mkdir -p .carry/next/$name
  strip -o .carry/next/$name/fragmask target/release/fragmask
  echo "$base${patch:++$name}" > .carry/next/$name/COMMIT
  [ -n "$patch" ] && git apply -R "$patch"
  echo "built .carry/next/$name"
}
build base
build dkdv $here/dk-after-dv.patch
build lse $here/lse-after-issues.patch
cargo build --release --quiet   # leave target/ at HEAD
