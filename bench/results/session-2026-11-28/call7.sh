#!/usr/bin/env bash
# Call 7 (H100): Python test_gpu + test_torch on 0f95727's wheel (the paired-key fix and its new test: 64-token blocks packed on the host and on the GPU).
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/n1/fm.xz n3 0f95727
site=$(fm_install .carry/w21)
SECONDS=0
( cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=/tmp/n3/fragmask timeout 300 python3 -m unittest test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s" )
grep -E "^(FAIL|ERROR)|pair_their" $OUT/py.txt | head; tail -4 $OUT/py.txt
timeout 120 /tmp/n3/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$?"; grep -c PASS $OUT/selftest.txt; tail -1 $OUT/selftest.txt
