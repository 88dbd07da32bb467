#!/usr/bin/env bash
# Call 4 (2 GPUs): context-parallel GPU tests and the Python GPU/torch tests on 20afa92's wheel
# (mask.to("cpu") read-back; the backward handle keeping its transposed lists alive).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/b3/fm.xz head 963c844
site=$(fm_install .carry/w23)
SECONDS=0
PYTHONPATH=$site FRAGMASK_BIN=/tmp/head/fragmask timeout 240 torchrun --nproc-per-node 2 crates/python/tests/test_distributed_gpu.py -v > $OUT/cp.txt 2>&1; echo "cp rc=$? ${SECONDS}s"
grep -E "^(test_|Ran|OK|FAILED)|Error|error" $OUT/cp.txt | head -30
cd crates/python/tests
SECONDS=0
PYTHONPATH=$site FRAGMASK_BIN=/tmp/head/fragmask timeout 240 python3 -m unittest -v test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s"
grep -E "transposed_copy|read_back|64_token" $OUT/py.txt; tail -4 $OUT/py.txt
