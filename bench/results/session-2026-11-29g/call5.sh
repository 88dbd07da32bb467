#!/usr/bin/env bash
# Call 5: at 9bf03a3, the run-time density check (a mask left on the GPU: A) against the
# host's choice for the same mask read back (B: dense-list kernels where every tile is partial,
# list-reading ones otherwise), interleaved in one process, 4 ABBA pairs per row
# (runtime_ab.py). B/A below 1: the host's static choice is faster.
set -u
source bench/suite/device_env.sh
site=$(fm_install .carry/k39b)
PYTHONPATH=$site timeout 540 python3 bench/results/session-2026-11-29g/runtime_ab.py 4 2>&1 | tee "$OUT/runtime_ab.txt"
