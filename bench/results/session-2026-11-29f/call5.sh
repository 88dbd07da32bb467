#!/usr/bin/env bash
# Call 5: issue 24's random 50% over no mask in one process (mask_overhead.py), d060ee1's wheel.
set -u
source bench/suite/device_env.sh
site=$(fm_install .carry/k38a)
PYTHONPATH=$site timeout 400 python3 bench/results/session-2026-11-29f/mask_overhead.py 6 2>&1 | tee "$OUT/mask_overhead.txt"
