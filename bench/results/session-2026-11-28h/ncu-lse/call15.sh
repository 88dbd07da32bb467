#!/usr/bin/env bash
# Call 15: where do the backward's 11.5 M shared-load bank conflicts come from (FA4: 21 k)? The D=128 causal
# backward with lse/Dsum as LDS.64 pairs (FM_EXP_LSE_PAIRS), and the D=128 causal forward (no dS, no lse loads).
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30d
M='l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__sass_inst_executed_op_shared_ld.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum'
run() { tag=$1; shift; timeout 120 ncu --clock-control none -k "$KN" -s 1 -c 1 --metrics $M --csv "$@" > $OUT/m-$tag.csv 2>$OUT/m-$tag.err; echo "$tag rc=$?"; grep -E 'bank_conflicts|cycles_elapsed|inst_executed_op_shared_ld|duration' $OUT/m-$tag.csv | awk -F'","' '{print "  ", $(NF-2), $NF}'; }
KN='regex:^fragmask_attention_bwd$'
run bwd-base /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1
FM_EXP_LSE_PAIRS=1 run bwd-pairs /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1
KN='regex:^fragmask_attention$'
run fwd-causal /tmp/A/fragmask bench attention --random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1
KN='regex:^fragmask_attention_bwd$'
run bwd-d64 /tmp/A/fragmask bench backward --random 1,16,16,16384,16384,64 --causal --warmup 1 --iters 1
run bwd-d256 /tmp/A/fragmask bench backward --random 1,16,16,8192,8192,256 --causal --warmup 1 --iters 1
