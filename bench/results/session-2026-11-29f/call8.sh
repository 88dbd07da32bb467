#!/usr/bin/env bash
# Call 8: split-KV for masks whose lists stay on the GPU: device_only_splits.py on d060ee1's
# wheel (A) and on the fix's (B), then the Python GPU and torch tests on B.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k38a/fm.xz H "$(cat .carry/k38a/COMMIT)"
siteA=$(fm_install .carry/k38a)
siteB=$(fm_install .carry/k38b)
for round in 1 2; do
  PYTHONPATH=$siteA timeout 100 python3 bench/results/session-2026-11-29f/device_only_splits.py A 2>&1 | tee -a "$OUT/splits.txt"
  PYTHONPATH=$siteB timeout 100 python3 bench/results/session-2026-11-29f/device_only_splits.py B 2>&1 | tee -a "$OUT/splits.txt"
done
(cd crates/python/tests && PYTHONPATH=$siteB FRAGMASK_BIN=/tmp/H/fragmask timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/python-tests.txt" 2>&1
echo "python tests rc=$?"; tail -3 "$OUT/python-tests.txt"
