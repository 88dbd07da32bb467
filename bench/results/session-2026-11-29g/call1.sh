#!/usr/bin/env bash
# Call 1 (thirty-ninth session): the Python GPU and torch tests at bed604f (the new
# device-only split test's first GPU run), then dense_py_ab.py at bed604f: what dense
# lists would still give masks left on the GPU after the split-tail fix (3 ABBA pairs).
set -u
source bench/suite/device_env.sh
site=$(fm_install .carry/k39a)
fm_unxz .carry/k39a/fm.xz k39a "$(cat .carry/k39a/COMMIT)"
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=/tmp/k39a/fragmask timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$?" >> "$OUT/pytests.txt"
PYTHONPATH=$site timeout 300 python3 bench/results/session-2026-11-29g/../session-2026-11-29f/dense_py_ab.py 3 2>&1 | tee "$OUT/dense_py_ab.txt"
tail -5 "$OUT/pytests.txt"
