#!/usr/bin/env bash
# Call 18 (probe): the dQ GEMM reading dS K-major (FM_EXP_DSK: wrong values, the read pattern of FA4's
# transposed dS) against the MN-major read: bank conflicts and cycles of the D=128 causal backward.
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30f
M='l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed'
for v in base dsk base dsk; do
  if [ $v = dsk ]; then export FM_EXP_DSK=1; else unset FM_EXP_DSK; fi
  for red in bulk fragment-atomics; do
  timeout 120 ncu --clock-control none -k 'regex:^fragmask_attention_bwd$' -s 1 -c 1 --metrics $M --csv /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1 --dq-reduce $red > $OUT/m-$v-$red.csv 2>&1
  echo "$v $red: $(grep -E 'bank_conflicts|cycles_elapsed|tensor' $OUT/m-$v-$red.csv | awk -F'","' '{printf "%s=%s ", substr($(NF-2),1,50), $NF}')"
  done
done
