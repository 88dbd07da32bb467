#!/usr/bin/env bash
# Call 8 (1 GPU): the Python GPU and torch tests after the CPU transposition of 64x64 host masks at their first backward.
# (mask.to("cpu") read-back; the backward handle keeping its transposed lists alive).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/b3/fm.xz head 963c844
site=$(fm_install .carry/w25)
SECONDS=0
: no CP this call

cd crates/python/tests
SECONDS=0
PYTHONPATH=$site FRAGMASK_BIN=/tmp/head/fragmask timeout 240 python3 -m unittest -v test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s"
grep -E "transposed_copy|read_back|64_token" $OUT/py.txt; tail -4 $OUT/py.txt
cd ../../..
for w in w24 w25; do
  s=$(fm_install .carry/$w)
  PYTHONPATH=$s timeout 120 python3 bench/results/session-2026-11-28b/from_blocks_vsa.py > $OUT/from_blocks_$w.txt 2>&1; echo "$w rc=$?"
  tail -4 $OUT/from_blocks_$w.txt
done
