#!/usr/bin/env bash
# Call 1: the Python GPU suite at f0ca87f (k41a, with 7f61214's capture test), Python's
# block-sparse forward against the CLI's on one mask, and the deterministic launch sections.
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29i
fm_unxz .carry/k41a/fm.xz A f0ca87f; fm_unxz .carry/k41b/fm.xz B detsec
site=$(fm_install .carry/k41a)
(cd crates/python/tests && PYTHONPATH=$site timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
(cd crates/python/tests && PYTHONPATH=$site python3 -m unittest -v test_gpu.AttentionTests.test_a_host_mask_first_planned_under_capture_uploads_no_row_order) 2>&1 | tail -3
PYTHONPATH=$site timeout 150 python3 $D/plan_compare.py /tmp/A/fragmask "$OUT" > "$OUT/plan_compare.txt" 2>&1; echo "plan rc=$?"; tail -8 "$OUT/plan_compare.txt"
timeout 200 python3 $D/detsec.py /tmp/A/fragmask /tmp/B/fragmask "$OUT/detsec.jsonl" 1 > "$OUT/detsec.txt" 2>&1; echo "detsec rc=$?"; tail -8 "$OUT/detsec.txt"
