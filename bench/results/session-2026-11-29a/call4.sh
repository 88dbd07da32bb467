#!/usr/bin/env bash
# Call 4 (605f1e0, k33c): memcheck over the whole backward selftest (every backward
# configuration it has: writer warp, paired keys, documents grid, group slices, head dim 256's
# pair mode, fp16, deterministic, the 64/128/128x64 mask tiles), and over the forward
# selftest's odd-shape cases of the tiles the CLI's sanitizer cases do not name.
set -uo pipefail
source bench/suite/device_env.sh
name=k33c
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
bin=/tmp/$name/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
timeout 330 compute-sanitizer --tool memcheck --error-exitcode 99 $bin attention --backward --selftest > $OUT/bwd-all-memcheck.txt 2>&1
echo "bwd memcheck rc=$? ${SECONDS}s $(grep -c '^PASS' $OUT/bwd-all-memcheck.txt) pass $(grep -c '^FAIL' $OUT/bwd-all-memcheck.txt) fail $(grep -o 'ERROR SUMMARY: .*' $OUT/bwd-all-memcheck.txt | tail -1)"
grep "^FAIL" $OUT/bwd-all-memcheck.txt | head -5
for g in 128x64 128x80 192x128 64x64/2; do
  SECONDS=0; log=$OUT/fwd-${g//\//_}-memcheck.txt
  timeout 70 compute-sanitizer --tool memcheck --error-exitcode 99 $bin attention --selftest --block $g --cases odd > $log 2>&1
  echo "fwd $g memcheck rc=$? ${SECONDS}s $(grep -c '^PASS' $log) pass $(grep -c '^FAIL' $log) fail $(grep -o 'ERROR SUMMARY: .*' $log | tail -1)"
done
