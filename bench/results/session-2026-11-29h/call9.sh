#!/usr/bin/env bash
# Call 9: the suite's forward block-sparse rows at b6e4ad2 (k40e) beside the CLI and
# FlexAttention, for PERF.md.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k40e/fm.xz E "$(cat .carry/k40e/COMMIT)" && cp .carry/k40e/*.whl /tmp/E/
site=$(fm_install /tmp/E)
c=$(cat .carry/k40e/COMMIT)
timeout 250 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/E/fragmask --commit "$c" \
  --systems fragmask,fragmask_cli,flex --only '^fwd[.](s16384|s4096|d256[.]s16384|d256[.]s4096)[.]blocksparse10$' \
  --output "$OUT/suite-$c-h200.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"; grep -E "^fwd" "$OUT/suite.log"
