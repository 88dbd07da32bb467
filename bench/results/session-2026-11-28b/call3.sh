#!/usr/bin/env bash
# Call 3 (H100): Python GPU and torch tests on 963c844's wheel (a GPU-packed mask read back by mask.to("cpu")
# plans as a host-packed one), the two 64-token tests verbose first.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/b3/fm.xz head $(cat .carry/w22/COMMIT)
site=$(fm_install .carry/w22)
cd crates/python/tests
SECONDS=0
PYTHONPATH=$site FRAGMASK_BIN=/tmp/head/fragmask timeout 150 python3 -m unittest -v \
  test_gpu.AutogradTests.test_64_token_blocks_pair_their_key_blocks_and_match_fp32 \
  test_gpu.AutogradTests.test_64_token_masks_read_back_from_the_gpu_plan_as_host_packed_ones > $OUT/py64.txt 2>&1; echo "py64 rc=$? ${SECONDS}s"
tail -30 $OUT/py64.txt
SECONDS=0
PYTHONPATH=$site FRAGMASK_BIN=/tmp/head/fragmask timeout 330 python3 -m unittest test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s"
tail -6 $OUT/py.txt
