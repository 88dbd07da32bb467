#!/usr/bin/env bash
# Call 7 (k34c): head dim 64's default now the one-block tile (against --shared-kv on, on
# pairs sharing whole lists); the paired backward still against unpaired on the H200.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k34c/fm.xz k34c "$(cat .carry/k34c/COMMIT)"; bin=/tmp/k34c/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 60 python3 bench/results/session-2026-11-29b/sharedkv_pairs.py $bin 2 --dim 64 --flags "--shared-kv on" \
  .carry/k34m/wu002-f10-o100.safetensors.xz 2>&1 | tee $OUT/d64-default.txt
timeout 150 python3 -m bench.suite.flag_pairs $bin '^bwd[.]wu002[.]blocks(10|50)$' 2 "--paired-keys off" 2>&1 | tee $OUT/bwd-paired.txt
