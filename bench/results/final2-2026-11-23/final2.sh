#!/bin/bash
# Final device call after merging decode2: attention selftest (every geometry, fp16), decode sweep
# with CUDA-graph replays (through the shared launch_struct), lightning check, the decode preset
# and the never-run mixed-batch bench, and the Python GPU tests (attention, decode, the CLI-output
# equality test).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1 FRAGMASK_CACHE_DIR=/tmp/fmcache
B=$PWD/.carry/fragmask
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 $B attention --selftest > $OUT/selftest.txt 2>&1
echo "attention selftest rc=$? $(grep -c ^PASS $OUT/selftest.txt) pass $(grep -c ^FAIL $OUT/selftest.txt) fail"; grep ^FAIL $OUT/selftest.txt | head -3
timeout 120 $B decode --sweep --graph > $OUT/decode_sweep.txt 2>&1; echo "decode sweep rc=$? $(tail -1 $OUT/decode_sweep.txt)"
timeout 60 $B lightning --random 2,64,1,96 --steps 200 > $OUT/lightning.txt 2>&1; echo "lightning rc=$? $(tail -1 $OUT/lightning.txt)"
timeout 90 $B bench decode --preset issue11 --iters 30 > $OUT/decode_bench.txt 2>&1; echo "decode bench rc=$?"; grep -E "^\| B=" $OUT/decode_bench.txt | cut -d'|' -f2,12,13,14,15 | head -8
timeout 60 $B bench decode --batch 4 --seqlen-q 32 --seqlens-q 1,7,1,30 --iters 20 > $OUT/decode_varlen.txt 2>&1; echo "varlen bench rc=$?"; tail -4 $OUT/decode_varlen.txt
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
(cd crates/python/tests && FRAGMASK_BIN=$B timeout 300 python3 -m unittest -v test_gpu test_torch 2>&1) > $OUT/python_tests.txt; echo "python rc=$?"; grep -E "^(FAIL|ERROR)|^Ran|^OK|FAILED|skipped '" $OUT/python_tests.txt | head -12
