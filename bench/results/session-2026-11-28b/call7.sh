#!/usr/bin/env bash
# Call 7 (H100): write-up 002's VSA shape through the torch op with a GPU-packed mask, before and after mask.to("cpu").
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
site=$(fm_install .carry/w24)
SECONDS=0
PYTHONPATH=$site timeout 300 python3 bench/results/session-2026-11-28b/readback_vsa.py > $OUT/readback_vsa.txt 2>&1; echo "rc=$? ${SECONDS}s"
cat $OUT/readback_vsa.txt | tail -12
