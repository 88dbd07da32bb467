#!/usr/bin/env bash
# H100, 8a96c8e: Nsight Compute (--set full) of the write-up 002 forward at 10% of 64-token blocks (the shared-K/V tile).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
W=/tmp/nv; mkdir -p $W $OUT/ncu; cp .carry/ncuv/fm $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/ncu/device.txt
python3 - <<'PY'
import sys, json, os, tomllib
sys.path.insert(0, "bench")
import torch
from suite.routines import attention as a
wl = {w["name"]: w for w in tomllib.load(open("bench/suite/workloads.toml", "rb"))["workload"]}
p = dict(wl["fwd.wu002.blocks10"]["params"]); kind, arg = a._spec(p["mask"])
extra = a.host_inputs(torch, p, kind, arg) if a.needs_host_inputs(kind) else {}
os.makedirs("/tmp/nv/w", exist_ok=True)
json.dump(a.cli_command("/tmp/nv/fm", p, extra, 2, 3, "/tmp/nv/w")[1:], open("/tmp/nv/cmd.json", "w"))
PY
ARGS=$(python3 -c "import json; print(' '.join(json.load(open('/tmp/nv/cmd.json'))))")
echo "args: $ARGS" | tee $OUT/ncu/args.txt
$W/fm $ARGS | tail -1
timeout 240 ncu --clock-control none --set full --import-source no -k regex:fragmask_attention_fwd -s 2 -c 1 -f -o /tmp/nv/vsa $W/fm $ARGS > $OUT/ncu/ncu.log 2>&1; echo "ncu rc=$?"
ncu -i /tmp/nv/vsa.ncu-rep --page raw --csv > $OUT/ncu/vsa10.raw.csv 2>/dev/null
ncu -i /tmp/nv/vsa.ncu-rep --page source --print-source sass --csv > $OUT/ncu/vsa10.sass.csv 2>/dev/null
ncu -i /tmp/nv/vsa.ncu-rep --page details > $OUT/ncu/vsa10.details.txt 2>/dev/null
gzip -f $OUT/ncu/vsa10.raw.csv $OUT/ncu/vsa10.sass.csv
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Shared Memory|Tensor" $OUT/ncu/vsa10.details.txt | head -20
