#!/usr/bin/env bash
# Call 8 (2 GPUs): the context-parallel GPU tests on 0f95727's wheel, with a new MHA case of 64-token tiles whose backward parts pair their key blocks.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
site=$(fm_install .carry/w21)
PYTHONPATH=$site timeout 300 torchrun --nproc-per-node 2 crates/python/tests/test_distributed_gpu.py -v > $OUT/dist.txt 2>&1; echo "dist rc=$?"
grep -E "^(Ran|OK|FAIL|ERROR)|64-token" $OUT/dist.txt | sort | uniq | tail -12
