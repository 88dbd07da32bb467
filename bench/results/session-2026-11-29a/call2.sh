#!/usr/bin/env bash
# Call 2: the backward's mask-tile rule (k33b): the whole backward selftest (new
# cases on 128x64 at head dims 128/256 and 192x128 at 256), the sanitizers on the new
# cases, and the Python GPU tests of head_dim= masks in training (192x128 trains, 128x80
# is refused before the forward).
set -uo pipefail
source bench/suite/device_env.sh
name=k33b
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
site=$(fm_install .carry/$name)
bin=/tmp/$name/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 120 python3 -m unittest -v \
  test_gpu.AutogradTests.test_head_dim_masks_train_where_the_backward_reads_their_tile \
  test_gpu.AttentionTests.test_head_dim_masks_run_their_head_dims_tile_and_match_sdpa > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s")
tail -n 12 $OUT/py.txt
for tile in 128x64 192x128; do for tool in memcheck racecheck synccheck; do
  SECONDS=0
  log=$OUT/bwd-$tile-$tool.txt
  timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention --backward --selftest --cases "$tile]" > $log 2>&1
  echo "$tile $tool rc=$? ${SECONDS}s $(grep -c '^PASS' $log) pass $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $log | tail -1)"
done; done
SECONDS=0
timeout 300 $bin attention --backward --selftest > $OUT/bwd-selftest.txt 2>&1
echo "bwd selftest rc=$? ${SECONDS}s $(grep -c '^PASS' $OUT/bwd-selftest.txt) pass"
grep -E "128x64\]|192x128\]|^FAIL" $OUT/bwd-selftest.txt; tail -n 1 $OUT/bwd-selftest.txt
