#!/usr/bin/env bash
# Call 10 (run inline): the whole Python GPU and torch suite at b6e4ad2 (k40e).
source bench/suite/device_env.sh; site=$(fm_install .carry/k40e); (cd crates/python/tests && PYTHONPATH=$site timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "rc=$?"; grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
