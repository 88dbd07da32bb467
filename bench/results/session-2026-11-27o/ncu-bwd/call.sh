#!/usr/bin/env bash
# H100: Nsight Compute of the D=128 backward (S=16384, H=16), causal then no mask, fragmask (HEAD) beside FlashAttention-4.
set -u
T0=$SECONDS
bash .carry/fa4/part1/install-on-device.sh .carry/fa4/part2 2>&1 | tail -1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
for sys in fragmask fa4; do
  bash bench/suite/ncu_pair.sh .carry/s15/base $sys bwd --causal
done
echo "elapsed $((SECONDS-T0)) s"
if [ $((SECONDS-T0)) -lt 250 ]; then
  for sys in fragmask fa4; do bash bench/suite/ncu_pair.sh .carry/s15/base $sys bwd; done
fi
python3 bench/suite/ncu_summary.py $OUT 2>&1 | tail -60
