#!/usr/bin/env bash
# Call 3: call 2's skipped rows (the backward list rows and fp16 forward) at HEAD beside Flex,
# then the Python GPU and torch tests on the HEAD wheel.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k38a/fm.xz H "$(cat .carry/k38a/COMMIT)"
site=$(fm_install .carry/k38a)
c=$(cat .carry/k38a/COMMIT)
timeout 330 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/H/fragmask --commit "$c" \
  --systems fragmask,fragmask_cli,flex --budget-s 310 \
  --only '^(bwd[.]s(4096|8192|16384)[.](random50|topk8)([.]det)?|fwd[.]fp16[.]s16384[.]random50)$' \
  --output "$OUT/suite-lists-bwd-$c.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=/tmp/H/fragmask timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/python-tests.txt" 2>&1
echo "python tests rc=$?"; tail -3 "$OUT/python-tests.txt"
grep -v '^#' "$OUT/suite.log" | tail -16
