#!/bin/bash
# Final device call of the session: A/B of the 128x128 kernel before/after the step refactor,
# attention selftest over every geometry, decode at the planner's default splits (issue-11
# preset), and the Python GPU tests with the merged wheel (64-token tiles now launched).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
export PYTHONUNBUFFERED=1 FRAGMASK_CACHE_DIR=/tmp/fmcache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
echo "== A/B 128x128, S=16384 H=16 D=128 (ms)"; bash .carry/ab.sh 2>&1 | tee $OUT/ab.txt
echo "== attention selftest"; timeout 200 .carry/fragmask attention --selftest > $OUT/selftest.txt 2>&1
echo "selftest rc=$? $(grep -c ^PASS $OUT/selftest.txt) pass $(grep -c ^FAIL $OUT/selftest.txt) fail"; grep ^FAIL $OUT/selftest.txt | head -5
echo "== decode preset (default splits)"; timeout 150 .carry/fragmask bench decode --preset issue11 --iters 30 > $OUT/decode.txt 2>&1; echo "decode rc=$?"; tail -12 $OUT/decode.txt
echo "== python GPU tests"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
(cd crates/python/tests && timeout 240 python3 -m unittest test_gpu test_torch 2>&1) > $OUT/python_tests.txt; echo "python rc=$?"; grep -E "^(FAIL|ERROR)|^Ran|^OK|FAILED|skipped" $OUT/python_tests.txt | head -12
