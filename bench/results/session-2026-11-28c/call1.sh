#!/usr/bin/env bash
# Call 1 (1 GPU): the whole-block regression test of 1f8ecff against the wheel before the fix
# (e475847, expected to fail) and HEAD's (c9e626f); Nsight Compute of HEAD's head-dim-64
# forward, causal and no mask (S=16384, H=16), beside FA4's profile of session-2026-11-26d.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
old=$(fm_install .carry/w24); new=$(fm_install .carry/w27)
t=test_gpu.AutogradTests.test_whole_block_masks_without_transposed_lists_get_them_at_backward
for s in "$old" "$new"; do
  (cd crates/python/tests && PYTHONPATH=$s timeout 120 python3 -m unittest -v $t > $OUT/whole-$(basename $s).txt 2>&1)
  echo "$(basename $s) rc=$?"; tail -3 $OUT/whole-$(basename $s).txt
done
SECONDS=0
NCU_BUNDLE=1 bash bench/suite/ncu_pair.sh .carry/w27 fragmask fwd --causal --head-dim 64
mv $OUT/ncu-fragmask-fwd-causal.tar $OUT/ncu-fm-fwd-d64-causal.tar
NCU_BUNDLE=1 bash bench/suite/ncu_pair.sh .carry/w27 fragmask fwd --head-dim 64
mv $OUT/ncu-fragmask-fwd.tar $OUT/ncu-fm-fwd-d64-none.tar
echo "ncu ${SECONDS}s"
python3 bench/suite/ncu_summary.py $OUT 2>&1 | grep -A3 fragmask_attention_fwd
