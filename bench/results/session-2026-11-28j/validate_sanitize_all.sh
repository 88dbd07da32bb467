#!/usr/bin/env bash
# HEAD (.carry/h29, or /tmp/h29 when an earlier call of the warm machine unpacked it):
# bench/suite/sanitize.sh over every case of cli_cases.sh (32 cases, the two split-tail cases
# new), then the split-tail cases with O in [B, S, H, D].
set -uo pipefail
source bench/suite/device_env.sh
if [ ! -x /tmp/h29/fragmask ]; then fm_unxz .carry/h29/fm.xz h29 "$(cat .carry/h29/COMMIT)"; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 420 bash bench/suite/sanitize.sh /tmp/h29 > $OUT/sanitize_all.txt 2>&1
echo "all rc=$? ${SECONDS}s"; cp $OUT/sanitize/summary.txt $OUT/summary_all.txt
CASES='^fwd-(d64-tail|tail-random50)$' LAYOUT=bshd timeout 100 bash bench/suite/sanitize.sh /tmp/h29 > $OUT/sanitize_bshd_tail.txt 2>&1
echo "bshd tail rc=$? ${SECONDS}s"; cp $OUT/sanitize/summary.txt $OUT/summary_bshd_tail.txt
rm -rf $OUT/sanitize
for f in $OUT/summary_all.txt $OUT/summary_bshd_tail.txt; do
  echo "$f: $(wc -l < $f) runs, $(grep -c 'rc=0 ' $f) rc=0"; grep -v "rc=0 " $f | head
done
