#!/usr/bin/env bash
# Call 3 (H100): forward write-up 002 rows, issue 24's start (6f2ca7f) -> 7eea077; Python GPU/torch tests on the 7eea077 wheel.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/start && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.carry/c3/start.xz'), open('/tmp/start/fragmask','wb'))" && chmod +x /tmp/start/fragmask && echo 6f2ca7f > /tmp/start/COMMIT
timeout 200 python3 bench/suite/run.py --ab /tmp/start .carry/h19 --interleave --rounds 3 --systems fragmask_cli --budget-s 180 \
  --only '^fwd\.(wu002\.blocks(10|50)|s16384\.none)$' --out $OUT/abwu002 2>&1 | grep -v "^#" | grep "B/A" | tee $OUT/abwu002.txt
site=$(fm_install .carry/h19)
bin=$PWD/.carry/h19/fragmask; ( cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 300 python3 -m unittest test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$?" ); tail -4 $OUT/py.txt; grep -c "skipped" $OUT/py.txt
