#!/usr/bin/env bash
# Call 4 (2 GPUs): context-parallel GPU tests (with the new causal GQA 8:2 case) and the new single-GPU group-slice test.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
site=$(fm_install .carry/h19)
( cd crates/python/tests && PYTHONPATH=$site timeout 120 python3 -m unittest -v -k group_slices -k every_mask_source test_gpu > $OUT/py1.txt 2>&1; echo "py1 rc=$?" ); tail -5 $OUT/py1.txt
PYTHONPATH=$site timeout 420 torchrun --nproc-per-node 2 crates/python/tests/test_distributed_gpu.py -v > $OUT/dist.txt 2>&1; echo "dist rc=$?"
grep -E "^(test_|Ran|OK|FAIL|ERROR)|GQA 8:2" $OUT/dist.txt | sort | uniq | tail -30
