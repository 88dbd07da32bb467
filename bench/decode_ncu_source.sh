#!/usr/bin/env bash
# Nsight Compute on write-up 002's masked decode (issue 11): where the warps of
# fm_decode_split spend their cycles, per SASS instruction (warp-state samples), for 1% of
# the 64-token blocks at 8 splits (one step per CTA: the fixed cost) and 10% at 16 splits.
# Needs .carry/base/fragmask and .carry/cache (bench/decode6_prepare.sh). Logs under $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda-13.0/bin:$PATH
C=${CARRY:-.carry}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/fm-cache /tmp/ncu
cp -r "$C/cache/." /tmp/fm-cache/
export FRAGMASK_CACHE_DIR=/tmp/fm-cache
FM=$C/base/fragmask
for frac in 0.01 0.1; do
  python3 - "$frac" <<'PY'
import sys, numpy as np, torch
frac = float(sys.argv[1]); H, NB = 12, 364
g = torch.Generator().manual_seed(int(frac * 1000)); k = max(1, round(frac * NB))
idx = torch.rand(H, 1, NB, generator=g).topk(k, dim=-1).indices.sort(dim=-1).values
np.save(f"/tmp/ncu/idx_{frac}.npy", idx.to(torch.int32).numpy())
np.save(f"/tmp/ncu/num_{frac}.npy", np.full((H, 1), k, dtype=np.int32))
PY
  "$FM" pack --blocks /tmp/ncu/idx_$frac.npy --blocks-num /tmp/ncu/num_$frac.npy --seqlen-q 64 \
    --seqlen-k 23296 --block 64x64 --warpgroups 1 -q -o /tmp/ncu/mask_$frac.safetensors
done
run() {  # fraction splits tag
  timeout 200 ncu --clock-control none -k regex:fm_decode_split --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight --section LaunchStats \
    --import-source no -o /tmp/ncu/rep_$3 \
    "$FM" decode --random 1,64,12,12,23296,128 --mask /tmp/ncu/mask_$1.safetensors --splits "$2" > "$OUT/run_$3.log" 2>&1
  ncu -i /tmp/ncu/rep_$3.ncu-rep --page source --print-source sass --csv > /tmp/ncu/src_$3.csv 2> "$OUT/src_err_$3.log"
  ncu -i /tmp/ncu/rep_$3.ncu-rep --page details > "$OUT/details_$3.txt" 2>&1
  gzip -c /tmp/ncu/src_$3.csv > "$OUT/src_$3.csv.gz"
}
run 0.01 8 p1
run 0.1 16 p10
ls -la /tmp/ncu "$OUT"
grep -E "Duration|Elapsed Cycles|Registers|Achieved Occupancy|Warp Cycles Per Issued" "$OUT"/details_*.txt
head -c 600 /tmp/ncu/src_p1.csv
