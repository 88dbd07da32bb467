#!/usr/bin/env bash
# Call 1: HEAD (k32a) against the d256 bias written ahead + 3 K/V stages on the 128x128 d128 list kernels (k32b):
# outputs byte for byte, then 4 interleaved ABBA pairs on every row whose kernel changed plus two controls.
set -uo pipefail
export A_DIR=.carry/k32a B_DIR=.carry/k32b ROUNDS=4 AB_S=470
export ONLY='^fwd[.]((s16384|s4096)[.](random50|random10|blocksparse10|topk8)|s8192[.]random50|d256[.]s16384[.](none|random50|blocksparse10|topk8)|d256[.]s4096[.]blocksparse10|s16384[.]none)$'
bash bench/results/session-2026-11-28l/ab.sh
