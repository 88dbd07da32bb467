#!/usr/bin/env bash
# Call 5: Nsight Compute of the deterministic block-sparse backward (S=16384 H=16 D=128,
# 10% of tiles) at 8 planes per section, at the grid's order, and the non-deterministic
# kernel: stall reasons, L2, and per-instruction samples of the deterministic one.
source bench/suite/device_env.sh
fm_unxz .carry/k41e/fm.xz E 35ff81a
F=/tmp/E/fragmask
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters --section LaunchStats"
run() {  # name, flags...
  local name=$1; shift
  timeout 150 ncu --clock-control none --kernel-name fragmask_attention_bwd --launch-skip 2 --launch-count 1 $S \
    -o "/tmp/$name" -f $F bench backward --random 1,16,16,16384,16384,128 --synthetic-mask blocksparse:0.1:0.5 \
    --warmup 2 --iters 1 --json "$@" > "$OUT/$name.log" 2>&1
  echo "$name rc=$?"
  ncu --import "/tmp/$name.ncu-rep" --csv --page details > "$OUT/$name-details.csv" 2>/dev/null
}
run det8 --deterministic
run det1 --deterministic --head-section 1
run nondet
ncu --import /tmp/det8.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -6 > "$OUT/det8-source.csv.gz"
ncu --import /tmp/det1.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip -6 > "$OUT/det1-source.csv.gz"
ls -la "$OUT"
python3 - "$OUT" <<'PY'
import csv, sys, os
keys = ("Duration", "Elapsed Cycles", "L2 Hit Rate", "DRAM Throughput", "Compute (SM) Throughput", "Issue Slots Busy",
        "No Eligible", "Warp Cycles Per Issued Instruction", "Executed Instructions")
for name in ("det8", "det1", "nondet"):
    lines = [l for l in open(os.path.join(sys.argv[1], f"{name}-details.csv")) if l.startswith('"')]
    vals = {}
    for r in csv.DictReader(lines):
        if r.get("Metric Name") in keys:
            vals[r["Metric Name"]] = r["Metric Value"] + " " + r.get("Metric Unit", "")
    print(name, "; ".join(f"{k}={v}" for k, v in vals.items()))
PY
