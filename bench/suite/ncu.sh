#!/usr/bin/env bash
# Nsight Compute on one suite workload's fragmask kernels (GPU machine, repository root):
#
#   bash bench/suite/ncu.sh WORKLOAD [BUILD]      # e.g. fwd.s16384.random50
#
# Runs the workload with fragmask alone (one warm-up, one timed call) under ncu, profiling
# COUNT (default 4) kernels named fragmask_* after SKIP (default 2) launches, with the
# sections that show where a tile's time goes. Writes $OUT/ncu-WORKLOAD.csv and prints the
# headline metrics. Env: SKIP, COUNT, SECTIONS.
set -uo pipefail
cd "$(dirname "$0")/../.."
workload=${1:?usage: ncu.sh WORKLOAD [BUILD]}
build=${2:-.carry/suite/build}
source bench/suite/device_env.sh
site=$(fm_install "$build") || exit 1
sections=${SECTIONS:-"--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats"}
csv="$OUT/ncu-$workload.csv"
# shellcheck disable=SC2086
timeout 500 ncu --clock-control none --kernel-name regex:^fragmask_ --launch-skip "${SKIP:-2}" \
    --launch-count "${COUNT:-4}" $sections --csv --page details \
    python3 bench/suite/run.py --only "^${workload//./\\.}\$" --systems fragmask --site "$site" \
    --warmup 1 --iters 1 --output /tmp/ncu-suite.jsonl > "$csv" 2> "$OUT/ncu-$workload.err"
echo "ncu rc=$?"
python3 - "$csv" <<'PY'
import csv, sys
keys = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "DRAM Throughput", "L2 Hit Rate",
        "Registers Per Thread", "Achieved Occupancy", "Issue Slots Busy", "No Eligible",
        "Warp Cycles Per Issued Instruction")
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
seen = {}
for r in csv.DictReader(lines):
    k = (r.get("ID"), r.get("Kernel Name", "")[:40])
    if r.get("Metric Name") in keys:
        seen.setdefault(k, []).append(f"{r['Metric Name']}={r['Metric Value']} {r.get('Metric Unit', '')}".strip())
for (i, name), vals in seen.items():
    print(f"[{i}] {name}: " + "; ".join(vals))
if not seen:
    print("no fragmask kernel was profiled (see the .err file)")
PY
