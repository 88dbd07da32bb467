#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
export FRAGMASK_CACHE_DIR=$PWD/.carry-bwd/cache
B=$PWD/.carry-bwd/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
timeout 300 $B attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"
grep -E "FAIL|selftest:" $OUT/selftest.txt | head -40
for spec in "--random 1,16,16,8192,8192,128" "--random 1,16,16,8192,8192,128 --synthetic-mask random:0.5" "--random 1,16,16,16384,16384,128" "--random 1,16,16,16384,16384,128 --synthetic-mask random:0.5" "--random 1,16,16,8192,8192,128 --causal"; do
  for mode in "" "--dq-atomics" "--deterministic"; do
    echo "== bench backward $spec $mode"
    timeout 90 $B bench backward $spec $mode --warmup 5 --iters 20 2>&1 | tail -2
  done
done > $OUT/bench.txt 2>&1
cat $OUT/bench.txt | grep -E "==|median|error"
SECTIONS="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SchedulerStats"
for mode in "" "--dq-atomics"; do
  timeout 150 ncu --clock-control none --kernel-name regex:'^fragmask_attention_bwd$' --launch-count 1 $SECTIONS \
    $B attention --backward --random 1,16,16,8192,8192,128 $mode --bench --warmup 0 --iters 1 > $OUT/ncu$mode.txt 2>&1
  echo "ncu $mode rc=$?"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|L2 Hit|Stall|Warp Cycles Per Issued|Executed Ipc|DRAM Through|Tensor|Registers" $OUT/ncu$mode.txt | head -30
done
