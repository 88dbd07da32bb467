#!/usr/bin/env bash
# Call 5: the suite's deterministic rows at 2ee5bb4 (the rotation removed), fragmask and its CLI.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k37c/fm.xz B 2ee5bb4
site=$(fm_install .carry/k37c)
timeout 400 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/B/fragmask --commit 2ee5bb4 \
  --systems fragmask,fragmask_cli --budget-s 380 --only '^bwd[.]s16384[.].*[.]det$' \
  --output "$OUT/suite-det.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"; grep -E "^bwd" "$OUT/suite.log"
