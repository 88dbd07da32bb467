#!/usr/bin/env bash
# Call 2: the suite's tile-list rows at HEAD (forward dense lists ad66ae0, backward dense lists
# d060ee1) beside Flex, for PERF.md; then the forward selftest's tile-list cases to the end.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k38a/fm.xz H "$(cat .carry/k38a/COMMIT)"
site=$(fm_install .carry/k38a)
c=$(cat .carry/k38a/COMMIT)
timeout 320 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/H/fragmask --commit "$c" \
  --systems fragmask,fragmask_cli,flex --budget-s 300 \
  --only '^(fwd|bwd)[.](d64[.]|d256[.]|fp16[.])?s(4096|8192|16384)[.](random(10|50)|topk8)([.]det)?$' \
  --output "$OUT/suite-lists-$c.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"
timeout 230 /tmp/H/fragmask attention --selftest --cases blocks > "$OUT/selftest-fwd-blocks.txt" 2>&1
echo "fwd selftest blocks rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-fwd-blocks.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-fwd-blocks.txt")"
tail -3 "$OUT/selftest-fwd-blocks.txt"
tail -22 "$OUT/suite.log"
