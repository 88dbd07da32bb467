#!/usr/bin/env bash
# Call 6 (605f1e0, k33c): call 5's synccheck of the whole backward selftest stopped at
# "[64x64] random 50% d128" (a divergent-threads barrier error in CTA 2, consumer threads; every
# later case then failed on the broken context). Here: each selftest case under synccheck in
# its own process, and the 64-token paired backward on odd and even key-block counts.
set -uo pipefail
source bench/suite/device_env.sh
name=k33c
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
bin=/tmp/$name/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
sc() { timeout 60 compute-sanitizer --tool synccheck --error-exitcode 99 "$@" > $OUT/last.txt 2>&1; local rc=$?; echo "rc=$rc $(grep -c 'Barrier error' $OUT/last.txt) barrier errors"; }
for sk in 320 384 260; do for pk in on off; do
  echo "CLI 64x64 d128 Sk=$sk paired $pk: $(sc $bin attention --backward --random 1,2,2,256,$sk,128 --block 64x64 --synthetic-mask random:0.5 --paired-keys $pk)"
done; done
echo "CLI 64x64 d64 Sk=320 paired on: $(sc $bin attention --backward --random 1,2,2,256,320,64 --block 64x64 --synthetic-mask random:0.5 --paired-keys on)"
echo "CLI 128x128 d128 Sk=320: $(sc $bin attention --backward --random 1,2,2,256,320,128 --synthetic-mask random:0.5)"
SECONDS=0
mkdir -p $OUT/sync
i=0
while IFS= read -r c; do
  i=$((i+1))
  timeout 60 compute-sanitizer --tool synccheck --error-exitcode 99 $bin attention --backward --selftest --cases "$c" > $OUT/sync/$i.txt 2>&1
  rc=$?
  [ $rc -ne 0 ] && echo "case $i rc=$rc $(grep -c 'Barrier error' $OUT/sync/$i.txt) barrier errors: $c"
  [ $SECONDS -gt 330 ] && { echo "stopped after $i cases"; break; }
done < bench/results/session-2026-11-29a/bwd-case-names.txt
echo "per-case synccheck: $i cases in ${SECONDS}s"
