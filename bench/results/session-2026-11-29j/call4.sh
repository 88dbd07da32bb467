#!/usr/bin/env bash
# Call 4: HEAD (k42d): the Python GPU and torch tests (a deterministic case over host-packed
# block-sparse lists, whose walk orders the plan uploads), then planes per section with the
# writer warp and walk orders.
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29j
fm_unxz .carry/k42d/fm.xz K "$(cat .carry/k42d/COMMIT)"
site=$(fm_install .carry/k42d)
(cd crates/python/tests && PYTHONPATH=$site timeout 220 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
timeout 150 python3 $D/secsweep.py /tmp/K/fragmask "$OUT/secsweep.jsonl" 2 > "$OUT/secsweep.txt" 2>&1; echo "secsweep rc=$?"
cat "$OUT/secsweep.txt"
