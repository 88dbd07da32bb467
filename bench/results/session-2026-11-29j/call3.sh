#!/usr/bin/env bash
# Call 3: main at 28097f3 (k42c: both branches merged): the suite's deterministic rows
# (Python and CLI), then the Python GPU and torch tests on its wheel.
source bench/suite/device_env.sh
fm_unxz .carry/k42c/fm.xz C "$(cat .carry/k42c/COMMIT)"
site=$(fm_install .carry/k42c)
timeout 220 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/C/fragmask --commit "$(cat .carry/k42c/COMMIT)" --systems fragmask,fragmask_cli --only '[.]det$' --output "$OUT/suite-det.jsonl" > "$OUT/suite-det.log" 2>&1; echo "det rc=$?"
(cd crates/python/tests && PYTHONPATH=$site timeout 220 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
grep -E "^bwd" "$OUT/suite-det.log" | tail -14
