#!/usr/bin/env bash
# Call 6 (H100): the paired kernel's knobs (two Q/dO stages against three, no dQ writer warp), 2 ABBA pairs on the VSA backward rows; Nsight Compute of its three kernels at 10% of blocks.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/n1/fm.xz n2 feef8e5
SECONDS=0
timeout 330 python3 -m bench.suite.flag_pairs /tmp/n2/fragmask '^bwd\.wu002\.blocks(10|50)$' 2 "--bwd-stages 2" "--dq-writer off" 2>&1 | tee $OUT/knobs.txt
echo "knobs ${SECONDS}s"
SECONDS=0
# (ncu ran in the first try of this call)
: SKIP=0 COUNT=10 SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis" timeout 200 bash bench/suite/ncu.sh bwd.wu002.blocks10 .carry/w20 > $OUT/ncu.txt 2>&1; echo "ncu ${SECONDS}s"
tail -25 $OUT/ncu.txt
