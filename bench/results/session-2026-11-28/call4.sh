#!/usr/bin/env bash
# Call 4 (H100): the VSA backward rows beside Flex (3 runs, feef8e5) and the Python GPU tests on feef8e5's wheel.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
[ -x /tmp/n2/fragmask ] || un .carry/n1/fm.xz n2 feef8e5
site=$(fm_install .carry/w20)
SECONDS=0
( cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=/tmp/n2/fragmask timeout 240 python3 -m unittest test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s" ); tail -4 $OUT/py.txt
SECONDS=0
timeout 300 python3 bench/suite/run.py --only '^bwd\.wu002\.blocks(10|50)$' --bin /tmp/n2/fragmask --site $site --commit feef8e5 --repeat 3 --isolate --out $OUT/suite > $OUT/suite.txt 2>&1; echo "suite rc=$? ${SECONDS}s"
grep -v "^#" $OUT/suite.txt | tail -12
