#!/bin/bash
# fp16 attention: selftest (fp16 cases through the raw launch) + Python GPU tests with the fp16 test.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1 FRAGMASK_CACHE_DIR=/tmp/fmcache
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 .carry/fragmask attention --selftest > $OUT/selftest.txt 2>&1
echo "selftest rc=$? $(grep -c ^PASS $OUT/selftest.txt) pass $(grep -c ^FAIL $OUT/selftest.txt) fail; fp16: $(grep fp16 $OUT/selftest.txt | grep -c ^PASS) pass"; grep ^FAIL $OUT/selftest.txt | head -5
grep "fp16" $OUT/selftest.txt | head -4 | cut -c1-160
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
(cd crates/python/tests && timeout 240 python3 -m unittest -v test_gpu test_torch 2>&1) > $OUT/python_tests.txt; echo "python rc=$?"; grep -E "fp16|64_token|^(FAIL|ERROR)|^Ran|^OK|FAILED" $OUT/python_tests.txt | head -12
for m in "" "--synthetic-mask random:0.5"; do .carry/fragmask bench attention --random 1,16,16,16384,16384,128 $m --json | tail -1 | cut -c1-200; done
