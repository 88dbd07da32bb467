#!/usr/bin/env bash
# Call 4: dense tile lists through the Python op (dense_py_ab.py): one GPU-packed mask left on
# the device (A: list-reading kernels) against the same mask read back (B: dense lists), at
# d060ee1, bit-identity checked, 4 interleaved pairs per row.
set -u
source bench/suite/device_env.sh
site=$(fm_install .carry/k38a)
PYTHONPATH=$site timeout 500 python3 bench/results/session-2026-11-29f/dense_py_ab.py 4 2>&1 | tee "$OUT/dense_py_ab.txt"
