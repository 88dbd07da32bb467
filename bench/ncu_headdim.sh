#!/bin/bash
# Nsight Compute on the head-dim geometries at S=16384, H=16 with no mask and with a random 50%
# token mask (every tile partial): what the mask costs at head dims 64 (192x128) and 256
# (128x80). Usage on the GPU machine: bash bench/ncu_headdim.sh > $OUT/ncu_headdim.txt
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-.carry/fragmask}
M=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,gpu__time_duration.sum
for case in "64 192x128" "256 128x80" "128 128x128"; do
  set -- $case
  for mask in "" "--synthetic-mask random:0.5"; do
    echo "== D=$1 --block $2 ${mask:-no mask}"
    ncu --clock-control none --launch-skip 1 --launch-count 1 -k fragmask_attention_fwd --metrics $M \
      $BIN bench attention --random 1,16,16,16384,16384,$1 --block $2 $mask --warmup 1 --iters 1 2>&1 \
      | grep -E "^    (sm__|smsp__|lts__|gpu__)" | awk '{print $1, $(NF)}'
  done
done
