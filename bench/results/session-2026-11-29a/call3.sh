#!/usr/bin/env bash
# Call 3 (605f1e0, k33c): after refusing 192-row mask tiles in the backward (they overran the
# workspace's ROW_PAD rows: call 2's memcheck at head dim 256). The whole backward selftest,
# memcheck on the 128x64 cases, every Python GPU and torch test.
set -uo pipefail
source bench/suite/device_env.sh
name=k33c
commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
site=$(fm_install .carry/$name)
bin=/tmp/$name/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SECONDS=0
$bin bench backward --random 1,2,2,300,260,64 --synthetic-mask random:0.5 --block 192x128 2>&1 | tail -1
timeout 150 $bin attention --backward --selftest > $OUT/bwd-selftest.txt 2>&1
echo "bwd selftest rc=$? ${SECONDS}s $(grep -c '^PASS' $OUT/bwd-selftest.txt) pass"; grep "^FAIL" $OUT/bwd-selftest.txt; tail -n 1 $OUT/bwd-selftest.txt
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 $bin attention --backward --selftest --cases "128x64]" > $OUT/bwd-128x64-memcheck.txt 2>&1
echo "memcheck 128x64 rc=$? $(grep -o 'ERROR SUMMARY: .*' $OUT/bwd-128x64-memcheck.txt | tail -1)"
(cd crates/python/tests && SECONDS=0 && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 240 python3 -m unittest -v test_gpu test_torch > $OUT/py.txt 2>&1; echo "py rc=$? ${SECONDS}s")
grep -E "head_dim|FAIL|ERROR" $OUT/py.txt | head; tail -n 3 $OUT/py.txt
