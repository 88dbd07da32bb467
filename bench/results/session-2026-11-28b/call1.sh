#!/usr/bin/env bash
# Call 1 (H100): the forward shared-K/V pairs longest first (host table order) A/B against 0f95727's binary;
# the 64x64 forward selftest on the new binary; ncu of the paired backward at 50%; Python host overhead of 64x64 masks.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/n1/fm.xz base 0f95727
un .carry/b1/fm.xz lpt lpt-fwd
SECONDS=0
timeout 120 /tmp/lpt/fragmask attention --selftest --block 64x64/2x2 > $OUT/selftest_shared.txt 2>&1; echo "selftest rc=$? ${SECONDS}s"; tail -3 $OUT/selftest_shared.txt
SECONDS=0
timeout 260 python3 bench/suite/run.py --ab /tmp/base /tmp/lpt --interleave --rounds 3 --systems fragmask_cli --budget-s 250 \
  --only '^(fwd\.wu002\.blocks(10|50|10v|50v)|fwd\.s16384\.random50|bwd\.wu002\.blocks10)$' --out $OUT/ab 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/ab.txt
echo "ab ${SECONDS}s"
SECONDS=0
site=$(fm_install .carry/w21)
SKIP=0 COUNT=3 SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis" timeout 150 bash bench/suite/ncu.sh bwd.wu002.blocks50 .carry/w21 > $OUT/ncu50.txt 2>&1; echo "ncu rc=$? ${SECONDS}s"
tail -14 $OUT/ncu50.txt
SECONDS=0
( cd bench && PYTHONPATH=$site:. FRAGMASK_BIN=/tmp/base/fragmask timeout 120 python3 python_overhead.py --mask-only --rounds 3 --json $OUT/mask_overhead.json > $OUT/mask_overhead.txt 2>&1; echo "overhead rc=$? ${SECONDS}s" )
cat $OUT/mask_overhead.txt | cut -c1-220
