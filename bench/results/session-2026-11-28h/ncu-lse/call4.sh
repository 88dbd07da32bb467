#!/usr/bin/env bash
# Call 4: Nsight Compute of the D=128 causal backward (S=16384, H=16) with lse read after the S^T wait
# (base, 0), before the S^T issue (2), after both issues (3) and between the S^T issue and the dO
# wait (4, FlashAttention-4's place). One main-kernel launch each, full set, per-instruction samples.
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30c
for v in 0 4 3; do
  rep=/tmp/ncu-lse$v
  FM_EXP_LSE_AHEAD=$v timeout 150 ncu --clock-control none -k 'regex:^fragmask_attention_bwd$' -s 1 -c 1 --set full --import-source no -f -o $rep \
    /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1 > $OUT/ncu-lse$v.log 2>&1
  echo "lse$v rc=$?"
  ncu -i $rep.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $OUT/ncu-lse$v.sass.csv.gz
  ncu -i $rep.ncu-rep --page raw --csv 2>/dev/null | gzip > $OUT/ncu-lse$v.raw.csv.gz
  ncu -i $rep.ncu-rep --page details --csv 2>/dev/null | grep -E '"Duration"|"Elapsed Cycles"|"SM Frequency"|Warp Cycles Per Issued|"Issue Slots Busy"' | cut -c1-400 | awk -F'","' '{print $(NF-2), $(NF-1), $NF}'
done
ls -la $OUT
