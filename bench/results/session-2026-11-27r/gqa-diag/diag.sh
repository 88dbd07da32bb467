#!/usr/bin/env bash
# GQA backward diagnosis: per-head cost against group size, launch sections, L2/DRAM (ncu).
set -uo pipefail
source bench/suite/device_env.sh
bin=.carry/head/fragmask
mkdir -p $OUT/diag
{
for cfg in "1,16,16" "1,32,8" "1,64,8"; do
  for hs in 1 2 4 8; do
    r=$($bin bench backward --random $cfg,16384,16384,128 --causal --head-section $hs --iters 10 --warmup 3 --json 2>&1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(round(d['ms_median'],4), d['kernel'])" 2>&1 | tail -1)
    echo "cfg=$cfg head_section=$hs ms=$r"
  done
done
} 2>&1 | tee $OUT/diag/sections.txt
for cfg in "1,16,16" "1,64,8"; do
  timeout 200 ncu --clock-control none --kernel-name regex:fragmask_attention_bwd --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --csv --page details \
    $bin bench backward --random $cfg,16384,16384,128 --causal --iters 1 --warmup 1 > $OUT/diag/ncu-${cfg//,/_}.csv 2>$OUT/diag/ncu-${cfg//,/_}.err
  python3 - $OUT/diag/ncu-${cfg//,/_}.csv "$cfg" <<'PY'
import csv,sys
lines=[l for l in open(sys.argv[1]) if l.startswith('"')]
keep=("Duration","DRAM Throughput","L2 Hit Rate","Memory Throughput","L1/TEX Hit Rate","Compute (SM) Throughput","L2 Compression","Mem Busy","Max Bandwidth")
for r in csv.DictReader(lines):
    if r.get("Metric Name") in keep: print(sys.argv[2], r["Kernel Name"][:36], r["Metric Name"], r["Metric Value"], r.get("Metric Unit",""))
PY
done
