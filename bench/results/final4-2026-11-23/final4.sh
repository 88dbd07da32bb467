#!/bin/bash
# Device call 4: the write-up 002 backward workload side by side with FlexAttention (backward_bench.py
# now tries smaller Flex backward blocks when Inductor finds no all-64 config), and Nsight Compute of
# write-up 002's masked decode (why 0.059 / 0.026 ms miss 0.05 / 0.02).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
B=$PWD/.carry/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 120 ncu --clock-control none -k regex:fm_decode --csv \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum \
  $B bench decode --preset writeup002 --warmup 1 --iters 2 > $OUT/ncu_decode.csv 2>&1; echo "ncu rc=$? t=$SECONDS"
python3 - $OUT/ncu_decode.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 10]
if not rows: print("no ncu rows"); sys.exit()
h = rows[0]; idx = {n: i for i, n in enumerate(h)}
by = collections.OrderedDict()
for r in rows[1:]:
    key = (r[idx["ID"]], r[idx["Kernel Name"]][:40])
    by.setdefault(key, {})[r[idx["Metric Name"]]] = r[idx["Metric Value"]]
for (i, name), m in by.items():
    print(i, name, " ".join(f"{k.split('.')[0].replace('smsp__average_warps_issue_stalled_','stall_')}={v}" for k, v in m.items()))
PY
timeout 330 python3 bench/backward_bench.py --bin "$B" --out "$OUT" --workdir /tmp/fm_bwd --iters 20 --only video10 > $OUT/video10.txt 2>&1
echo "video10 rc=$? t=$SECONDS"; tail -6 $OUT/video10.txt | cut -c1-600
