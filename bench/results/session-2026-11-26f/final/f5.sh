#!/usr/bin/env bash
# Call 5 (1×H100): split-KV rows the whole table read slower (3 pairs, base12 vs 59d581c), then the call-overhead table of the final wheel alone on the host.
set -u
F=.carry/s12/final; A=.carry/base12
for b in $F $A; do [ -x $b/fragmask ] || { xz -dc $b/fragmask.xz > $b/fragmask && chmod +x $b/fragmask; }; done
source bench/suite/device_env.sh
site=$(fm_install $F)
R=/tmp/f5; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/device.txt
timeout 120 python3 bench/suite/run.py --ab $A $F --interleave --rounds 3 --systems fragmask_cli \
   --only '^(split\.wu002\.blocks(10|50)|fwd\.wu002\.blocks50)$' --budget-s 100 --out $R/abs > $R/abs.txt 2>&1; echo "abs rc=$?" >> $R/rc.txt
PYTHONPATH=$site timeout 200 python3 bench/python_overhead.py --json $R/overhead.json > $R/overhead.txt 2>&1; echo "overhead rc=$?" >> $R/rc.txt
cd /tmp && tar czf $OUT/f5.tgz f5
cat f5/rc.txt; grep '^| ' f5/abs.txt | cut -c1-150
sed -n '/^Targets/,$p' f5/overhead.txt | head -24
