#!/usr/bin/env bash
# Call 8 (k34d = cc91778): the new paired-lists rows beside Flex (suite), and the shared-K/V
# tile against the one-block tile on them.
set -uo pipefail
source bench/suite/device_env.sh
commit=$(cat .carry/k34d/COMMIT); fm_unxz .carry/k34d/fm.xz k34d "$commit"; bin=/tmp/k34d/fragmask; site=$(fm_install .carry/k34d)
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-wu002p-h200.jsonl"
timeout 80 python3 bench/suite/run.py --isolate --only '^fwd[.]wu002[.]blocks(10|50)p$' --site "$site" \
  --systems fragmask,fragmask_cli,flex --commit "$commit" --bin "$bin" --output "$out" --budget-s 70 2>&1 | grep -v "^#" | tail -7
timeout 60 python3 -m bench.suite.flag_pairs $bin '^fwd[.]wu002[.]blocks(10|50)p$' 2 "--shared-kv off" 2>&1 | tee $OUT/paired-rows-off.txt
