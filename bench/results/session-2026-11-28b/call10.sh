#!/usr/bin/env bash
# Call 10 (1 GPU): the Python GPU and torch tests after the whole-block fix.
# (mask.to("cpu") read-back; the backward handle keeping its transposed lists alive).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/b3/fm.xz head 963c844
site=$(fm_install .carry/w26)
SECONDS=0
: no CP this call

cd crates/python/tests
SECONDS=0
PYTHONPATH=$site FRAGMASK_BIN=/tmp/head/fragmask timeout 240 python3 -m unittest -v test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s"
grep -E "transposed_copy|read_back|64_token|whole_block" $OUT/py.txt; tail -4 $OUT/py.txt
cd ../../..
