#!/usr/bin/env bash
# Final call 1 (x4 host): FA4 part 1, then the final build's checks, one family per card:
# GPU0 compute-sanitizer on every family; GPU1 forward selftest; GPU2 backward selftest, decode sweep,
# verify, lightning; GPU3 Python GPU + torch tests.
set -u
( bash .fa4/part1/install-on-device.sh .fa4/part1 > /tmp/fa4p1.txt 2>&1; echo "fa4 part1 rc=$?" >> /tmp/fa4p1.txt ) &
F=.carry/s12/final
[ -x $F/fragmask ] || { xz -dc $F/fragmask.xz > $F/fragmask && chmod +x $F/fragmask; }
source bench/suite/device_env.sh
site=$(fm_install $F)
R=/tmp/f1; mkdir -p $R/san
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $R/device.txt
( export CUDA_VISIBLE_DEVICES=0
  OUT=$R/san timeout 280 bash bench/suite/sanitize.sh $F "memcheck racecheck synccheck" > $R/san/log.txt 2>&1; echo "sanitize rc=$?" >> $R/rc.txt ) &
( export CUDA_VISIBLE_DEVICES=1
  for g in 128x128 192x128; do
    timeout 200 $F/fragmask attention --selftest --block $g > $R/fwd_selftest_$g.txt 2>&1; echo "fwd selftest $g rc=$?" >> $R/rc.txt; done ) &
( export CUDA_VISIBLE_DEVICES=2
  for g in 64x64/2 64x64/1 128x64 128x80; do n=${g/\//_}
    timeout 120 $F/fragmask attention --selftest --block $g > $R/fwd_selftest_$n.txt 2>&1; echo "fwd selftest $g rc=$?" >> $R/rc.txt; done ) &
( export CUDA_VISIBLE_DEVICES=3
  timeout 150 $F/fragmask attention --backward --selftest > $R/bwd_selftest.txt 2>&1; echo "bwd selftest rc=$?" >> $R/rc.txt
  timeout 40 $F/fragmask decode --sweep > $R/decode_sweep.txt 2>&1; echo "decode sweep rc=$?" >> $R/rc.txt
  timeout 40 $F/fragmask verify > $R/verify.txt 2>&1; echo "verify rc=$?" >> $R/rc.txt
  timeout 20 $F/fragmask lightning --random 2,64,1,96 --steps 200 > $R/lightning.txt 2>&1; echo "lightning rc=$?" >> $R/rc.txt
  cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$OLDPWD/$F/fragmask timeout 150 python3 -m unittest test_gpu test_torch > $R/py_tests.txt 2>&1; echo "py tests rc=$?" >> $R/rc.txt ) &
wait
cat /tmp/fa4p1.txt | tail -2
cd /tmp && tar czf $OUT/f1.tgz f1
cat f1/rc.txt
for f in f1/fwd_selftest_*.txt; do echo "$f: $(grep -c '^PASS' $f) PASS, $(tail -1 $f)"; grep "^FAIL" $f | head -3; done
tail -1 f1/bwd_selftest.txt; grep "^FAIL" f1/bwd_selftest.txt | head -5
tail -1 f1/decode_sweep.txt; tail -2 f1/verify.txt; tail -1 f1/lightning.txt
grep -E "^(Ran|OK|FAILED)" f1/py_tests.txt
echo "sanitizer rows: $(wc -l < f1/san/sanitize/summary.txt 2>/dev/null), not clean:"; grep -v "rc=0 .*\(ERROR SUMMARY: 0 errors\|0 hazards displayed\)" f1/san/sanitize/summary.txt 2>/dev/null | head
