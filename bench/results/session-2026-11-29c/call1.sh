#!/usr/bin/env bash
# Call 1 (k35a = HEAD e0931f3): issue 24's start (6f2ca7f) against HEAD on the rows whose kernel
# choice changed since the last whole-table A/B (write-up 002's forward rows) and the random 50% /
# no-mask pair; Nsight Compute of the random 50% and no-mask forward kernels (one launch each, full
# set, per-instruction samples); the Python GPU and torch tests on HEAD's wheel.
set -uo pipefail
source bench/suite/device_env.sh
name=k35a; commit=$(cat .carry/$name/COMMIT)
fm_unxz .carry/$name/fm.xz $name "$commit"
fm_unxz .carry/start/fm.xz start 6f2ca7f
bin=/tmp/$name/fragmask
site=$(fm_install .carry/$name)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SECONDS=0
timeout 230 python3 bench/suite/run.py --ab /tmp/start /tmp/$name --interleave --rounds 2 \
  --systems fragmask_cli --only '^fwd[.](wu002[.]blocks(10|50)v?|s16384[.](none|random50))$' \
  --out $OUT/ab --budget-s 210 2>&1 | tail -14
echo "ab ${SECONDS}s"
for m in r50 none; do
  SECONDS=0
  flags=""; [ $m = r50 ] && flags="--synthetic-mask random:0.5"
  timeout 120 ncu --clock-control none --kernel-name regex:fragmask_attention_fwd --launch-skip 3 --launch-count 1 \
    --set full --import-source no -f -o /tmp/ncu-$m $bin attention --random b=1,h=16,hkv=16,sq=16384,sk=16384,d=128 \
    $flags --bench --warmup 3 --iters 2 > $OUT/ncu-$m.log 2>&1
  echo "ncu $m rc=$? ${SECONDS}s"
  ncu -i /tmp/ncu-$m.ncu-rep --page raw --csv > $OUT/ncu-$m.raw.csv 2>/dev/null
  ncu -i /tmp/ncu-$m.ncu-rep --page source --print-source sass --csv > $OUT/ncu-$m.sass.csv 2>/dev/null
  gzip -f $OUT/ncu-$m.raw.csv $OUT/ncu-$m.sass.csv
done
python3 bench/suite/ncu_summary.py $OUT 2>&1 | tail -30
SECONDS=0
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 150 python3 -m unittest test_gpu test_torch) > $OUT/pytests.txt 2>&1
echo "python tests rc=$? ${SECONDS}s: $(tail -3 $OUT/pytests.txt | tr '\n' ' ')"
