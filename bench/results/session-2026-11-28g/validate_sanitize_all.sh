#!/usr/bin/env bash
# HEAD (.carry/u29): bench/suite/sanitize.sh over every case of cli_cases.sh, then the attention
# cases not yet run with --out-layout bshd this session (validate_layouts.sh ran 14 of them).
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/u29/fragmask ] || fm_unxz .carry/u29/fm.xz u29 "$(cat .carry/u29/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 330 bash bench/suite/sanitize.sh /tmp/u29 > $OUT/sanitize_all.txt 2>&1
echo "all rc=$? ${SECONDS}s"; cp $OUT/sanitize/summary.txt $OUT/summary_all.txt
CASES='^(fwd-(window|docs|random50|gqa-blocksparse|64tok-persistent|causal-sections|causal-sections-persistent|64tok-shared-kv-sparse)|bwd-(window|random50|64tok-unpaired|d64-causal))$' \
  LAYOUT=bshd timeout 200 bash bench/suite/sanitize.sh /tmp/u29 > $OUT/sanitize_bshd_rest.txt 2>&1
echo "bshd rest rc=$? ${SECONDS}s"; cp $OUT/sanitize/summary.txt $OUT/summary_bshd_rest.txt
rm -rf $OUT/sanitize
for f in $OUT/summary_all.txt $OUT/summary_bshd_rest.txt; do
  echo "$f: $(wc -l < $f) runs, $(grep -c 'rc=0 ' $f) rc=0"; grep -v "rc=0 " $f | head
done
