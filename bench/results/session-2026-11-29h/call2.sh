#!/usr/bin/env bash
# Call 2: c7990ce (k40b: call 1's build plus the fixed Python test and docs): the whole
# Python GPU and torch suite; the suite's rows at HEAD for the new backward block-sparse row
# (beside the CLI and FlexAttention), top-k and the deterministic random 50% row (the CLI's
# time after 4ebecb9); a 3-round A/B of the identity-order mask rows against 0728792.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k40b/fm.xz N "$(cat .carry/k40b/COMMIT)" && cp .carry/k40b/*.whl /tmp/N/
fm_unxz .carry/k39f/fm.xz B "$(cat .carry/k39f/COMMIT)" && cp .carry/k39f/*.whl /tmp/B/
site=$(fm_install /tmp/N)
c=$(cat .carry/k40b/COMMIT)
(cd crates/python/tests && PYTHONPATH=$site timeout 240 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1
echo "pytests rc=$? $(tail -1 "$OUT/pytests.txt")" | tee "$OUT/summary.txt"
timeout 200 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/N/fragmask --commit "$c" \
  --systems fragmask,fragmask_cli,flex --only '^bwd[.]s16384[.](blocksparse10|topk8|random50[.]det)$' \
  --output "$OUT/suite-$c-h200.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?" | tee -a "$OUT/summary.txt"
timeout 130 python3 bench/suite/run.py --ab /tmp/B /tmp/N --rounds 3 --systems fragmask \
  --only '^bwd[.](s16384[.]topk8|s8192[.]random50|s4096[.]random50)$' \
  --out "$OUT" > "$OUT/ab.log" 2>&1
echo "ab rc=$?" | tee -a "$OUT/summary.txt"
rm -rf "$OUT"/ab-*-rounds
grep -E "^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
grep -E "^bwd" "$OUT/suite.log" | head -12
grep -E "^\| bwd" "$OUT/ab.log"
