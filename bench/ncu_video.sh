#!/bin/bash
# Nsight Compute on write-up 002's prefill at 50% of 64-token blocks kept (64x64 tile, one
# launch): speed of light, memory workload and the L2 / tensor-pipe counters behind the
# issue-15 analysis. Usage on the GPU machine: bash bench/ncu_video.sh > $OUT/ncu_video.txt
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
BIN=${BIN:-.carry/fragmask}
T=$(mktemp -d)
python3 - "$T" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(500)
H, NB, k = 12, 364, 182
idx = np.sort(np.argsort(rng.random((H, NB, NB)), axis=-1)[..., :k], axis=-1).astype(np.int32)
np.save(f"{sys.argv[1]}/idx.npy", idx); np.save(f"{sys.argv[1]}/num.npy", np.full((H, NB), k, np.int32))
PY
$BIN pack --blocks $T/idx.npy --blocks-num $T/num.npy --seqlen-q 23296 --seqlen-k 23296 --block 64x64 --warpgroups 1 -q -o $T/m.safetensors
for block in 64x64 64x64/1; do
  echo "== --block $block"
  ncu --clock-control none --launch-skip 1 --launch-count 1 -k fragmask_attention_fwd \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --metrics lts__t_bytes.sum.per_second,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second \
    $BIN attention --random 1,12,12,23296,23296,128 --mask $T/m.safetensors --block $block --bench --warmup 1 --iters 1 2>&1 \
    | grep -E "Duration|Throughput|Busy|Hit Rate|lts__|sm__pipe|dram__|l1tex__m|Max Bandwidth|Mem Pipes|median" 
done
rm -rf $T
