#!/bin/bash
# Final device call B (merged main): forward selftest (every geometry, fp16; the backward changed
# smem.rs/source.rs helpers), decode sweep with graph replays, racecheck of the new decode kernels,
# GPU packer verify, lightning, and every Python GPU test (attention, autograd, decode, packer).
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1
export FRAGMASK_CACHE_DIR=$PWD/.carry/cache
B=$PWD/.carry/fragmask
timeout 120 $B attention --selftest > $OUT/fwd_selftest.txt 2>&1
echo "fwd selftest rc=$? $(grep -c ^PASS $OUT/fwd_selftest.txt) pass $(grep -c ^FAIL $OUT/fwd_selftest.txt) fail t=$SECONDS"; grep ^FAIL $OUT/fwd_selftest.txt | head -3
timeout 120 $B decode --sweep --graph > $OUT/decode_sweep.txt 2>&1; echo "decode sweep rc=$? $(tail -1 $OUT/decode_sweep.txt) t=$SECONDS"
for s in "mask 64x64" "mask 64x128" "mask 128x128" "shared K/V D="; do
  r=$(timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B decode --sweep --sweep-only "$s" 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY" | tail -1)
  echo "decode racecheck | $s | $r"
done | tee $OUT/decode_racecheck.txt; echo "t=$SECONDS"
timeout 60 $B verify --packer-only > $OUT/packer_verify.txt 2>&1; echo "packer verify rc=$? $(grep -E 'checks:' $OUT/packer_verify.txt)"
timeout 60 $B lightning --random 2,64,1,96 --steps 200 > $OUT/lightning.txt 2>&1; echo "lightning rc=$? $(tail -1 $OUT/lightning.txt)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
(cd crates/python/tests && FRAGMASK_BIN=$B timeout 330 python3 -m unittest -v test_gpu test_torch 2>&1) > $OUT/python_tests.txt; echo "python rc=$? t=$SECONDS"; grep -E "^(FAIL|ERROR)|^Ran|^OK|FAILED|skipped '" $OUT/python_tests.txt | head -12
