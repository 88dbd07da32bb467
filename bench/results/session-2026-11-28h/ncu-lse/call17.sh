#!/usr/bin/env bash
# Call 17: the staged dQ chunk's bulk reduction split into PARTS copies (FM_EXP_PARTS, lanes 0..PARTS-1 of the
# writer warp): shared-memory bank conflicts and cycles of the D=128 causal backward under ncu; then an A/B.
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30e
M='l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum'
for parts in 1 2 4 8; do
  FM_EXP_PARTS=$parts timeout 120 ncu --clock-control none -k 'regex:^fragmask_attention_bwd$' -s 1 -c 1 --metrics $M --csv /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1 > $OUT/m-parts$parts.csv 2>&1
  echo "parts $parts: $(grep -E 'bank_conflicts|cycles_elapsed' $OUT/m-parts$parts.csv | awk -F'","' '{printf "%s=%s ", substr($(NF-2),1,60), $NF}')"
done
