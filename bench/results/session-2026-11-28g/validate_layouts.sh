#!/usr/bin/env bash
# c166fc8 (.carry/q29): the CLI's --out-layout bshd on the GPU. layouts.sh over every attention
# case of cli_cases.sh (both layouts, outputs compared), then memcheck, racecheck and synccheck
# on the bshd form of the cases that reach each strided variant.
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/q29/fragmask ] || fm_unxz .carry/q29/fm.xz q29 "$(cat .carry/q29/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 280 bash bench/suite/layouts.sh /tmp/q29 > $OUT/layouts.txt 2>&1
echo "layouts rc=$? ${SECONDS}s"
CASES='^(fwd-(causal|docs-persistent|64tok-shared-kv|splitkv|d64-causal|d256-blocksparse|window-persistent)|bwd-(causal|window-d64|gqa-causal-sections|64tok-paired-d64|64tok-writer|d256-causal|docs))$' \
  LAYOUT=bshd timeout 290 bash bench/suite/sanitize.sh /tmp/q29 > $OUT/sanitize_bshd.txt 2>&1
echo "sanitize rc=$? ${SECONDS}s"
cp -r $OUT/sanitize/summary.txt $OUT/sanitize_summary.txt 2>/dev/null
grep -c "rc=0 " $OUT/sanitize_summary.txt; grep -v "rc=0 " $OUT/sanitize_summary.txt | head -20
rm -f $OUT/layouts/*.safetensors
cat $OUT/layouts.txt
