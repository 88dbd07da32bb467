#!/usr/bin/env bash
# Call 7: the Python GPU and torch suites on the wheel that copies host masks' dispatch orders
# beside their lists at mask.to(device) (k41f, uncommitted tree over 8826e1a+).
source bench/suite/device_env.sh
site=$(fm_install .carry/k41f)
(cd crates/python/tests && PYTHONPATH=$site timeout 220 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
