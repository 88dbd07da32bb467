#!/usr/bin/env bash
# Call 10: the Python GPU and torch tests on 01bfb02's wheel (split-KV and the split tail of
# masks that stay on the GPU planned over every key block).
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k38a/fm.xz H "$(cat .carry/k38a/COMMIT)"
site=$(fm_install .carry/k38c)
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=/tmp/H/fragmask timeout 170 python3 -m unittest test_gpu test_torch) > "$OUT/python-tests.txt" 2>&1
echo "python tests rc=$?"; tail -3 "$OUT/python-tests.txt"
