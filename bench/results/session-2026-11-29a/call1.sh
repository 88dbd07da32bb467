#!/usr/bin/env bash
# Call 1: the Python GPU tests on a wheel of bded10e (head_dim= masks); the backward on a
# 192x128 mask tile (selftest, sanitizers, timed against 128x128 at head dim 64); the
# head-dim-64 random 50% forward row through Python with head_dim=.
set -uo pipefail
source bench/suite/device_env.sh
name=k33a
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
site=$(fm_install .carry/$name)
bin=/tmp/$name/fragmask
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SECONDS=0
timeout 150 $bin attention --backward --selftest --cases 192x128 > $OUT/bwd192-selftest.txt 2>&1
echo "bwd selftest 192x128 rc=$? ${SECONDS}s"; tail -n 4 $OUT/bwd192-selftest.txt
for tool in memcheck racecheck synccheck; do
  SECONDS=0
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 99 $bin attention --backward --selftest --cases 192x128 > $OUT/bwd192-$tool.txt 2>&1
  echo "$tool rc=$? ${SECONDS}s $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/bwd192-$tool.txt | tail -1)"
done
SECONDS=0
PYTHONPATH=$site timeout 150 python3 bench/results/session-2026-11-29a/bwd_tiles.py > $OUT/bwd_tiles.txt 2>&1
echo "bwd_tiles rc=$? ${SECONDS}s"; cat $OUT/bwd_tiles.txt | tail -n 12
(cd crates/python/tests && SECONDS=0 && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 200 python3 -m unittest -v test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s")
grep -E "head_dim|FAIL|ERROR" $OUT/py.txt | head; tail -n 3 $OUT/py.txt
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$commit-d64-h200.jsonl"
timeout 120 python3 bench/suite/run.py --isolate --only '^fwd[.]d64[.]s16384[.](none|random50)$' --site "$site" \
    --systems fragmask,fragmask_cli --commit "$commit" --bin "$bin" --output "$out" --budget-s 100 2>&1 | tail -8
