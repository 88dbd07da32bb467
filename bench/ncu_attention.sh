#!/bin/bash
# One device call: `fragmask verify` on the current build, then Nsight Compute on the
# attention kernel (B=1, H=16, D=128, S=16384) with no mask, a 50 % random-token mask
# and causal, one launch each, to show where a masked tile's time goes.
# Usage on the GPU machine (repo root, binary carried in .carry/): bash bench/ncu_attention.sh
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FRAGMASK_CACHE_DIR=${FRAGMASK_CACHE_DIR:-$PWD/.carry/cache}
OUT=${OUT:-/tmp/fragmask_out}; mkdir -p "$OUT"
BIN=.carry/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
echo "== fragmask verify"
timeout 240 $BIN verify > "$OUT/verify.txt" 2>&1; echo "verify rc=$?"
grep -E "PASS|FAIL|pass|fail" "$OUT/verify.txt" | tail -8
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats"
for case in "none:" "random50:--synthetic-mask random:0.5" "causal:--causal"; do
  label=${case%%:*}; flags=${case#*:}
  echo "== ncu $label"
  timeout 150 ncu --clock-control none --kernel-name fragmask_attention_fwd --launch-skip 2 --launch-count 1 \
    $SECTIONS --csv --page details \
    $BIN attention --random 1,16,16,16384,16384,128 $flags --bench --warmup 2 --iters 1 \
    > "$OUT/ncu_$label.csv" 2> "$OUT/ncu_$label.err"; echo "ncu rc=$?"
done
python3 - "$OUT" <<'PY'
import csv, sys, os
out = sys.argv[1]
keys = ["Duration", "Compute (SM) Throughput", "Memory Throughput", "Registers Per Thread",
        "Achieved Occupancy", "Issue Slots Busy", "Executed Ipc Active", "No Eligible",
        "L2 Hit Rate", "DRAM Throughput", "Warp Cycles Per Issued Instruction", "Executed Instructions"]
rows = {}
for label in ["none", "random50", "causal"]:
    p = os.path.join(out, f"ncu_{label}.csv")
    if not os.path.exists(p):
        continue
    vals = {}
    with open(p) as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        name, unit, val = r.get("Metric Name"), r.get("Metric Unit"), r.get("Metric Value")
        if name in keys and name not in vals:
            vals[name] = f"{val} {unit}".strip()
    rows[label] = vals
print("| metric | " + " | ".join(rows) + " |")
print("|---|" + "---|" * len(rows))
for k in keys:
    print(f"| {k} | " + " | ".join(rows[l].get(k, "-") for l in rows) + " |")
PY
