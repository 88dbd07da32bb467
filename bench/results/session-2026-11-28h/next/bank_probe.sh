#!/usr/bin/env bash
# Next session (GPU machine, repository root; a HEAD binary unpacked as /tmp/A/fragmask, e.g. by
# `source bench/suite/device_env.sh; fm_unxz .carry/DIR/fm.xz A COMMIT`): the D=128 causal backward's
# shared-memory bank conflicts (11.5 M loads against FlashAttention-4's 21 k, ~9 M with the bulk dQ
# path; README.md of this folder's parent) under the CLI's existing knobs, one cold call each:
# the writer warp off (consumers issue the bulk copies), a third Q/dO stage (every buffer after the
# stages moves), and both atomics paths (no staging buffers).
source bench/suite/device_env.sh
M='l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum'
shape='--random 1,16,16,16384,16384,128 --causal --warmup 1 --iters 1'
while read -r tag extra; do
    # shellcheck disable=SC2086
    timeout 120 ncu --clock-control none -k 'regex:^fragmask_attention_bwd$' -s 1 -c 1 --metrics $M --csv \
        /tmp/A/fragmask bench backward $shape $extra > "$OUT/bank-$tag.csv" 2>&1
    echo "$tag: $(grep -E 'bank_conflicts|cycles_elapsed' "$OUT/bank-$tag.csv" | awk -F'","' '{printf "%s=%s ", substr($(NF-2),1,58), $NF}')"
done <<'ROWS'
head
writer-off --dq-writer off
stages3 --bwd-stages 3
atomics --dq-reduce atomics
fragment-atomics --dq-reduce fragment-atomics
ROWS
