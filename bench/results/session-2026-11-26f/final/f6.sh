#!/usr/bin/env bash
# Call 6 (1×H100): the call-overhead table, wheel 8e5afc9 (call path = c647f90's) and the final wheel 59d581c, ABA on one host.
set -u
source bench/suite/device_env.sh
A=$(fm_install .carry/final); B=$(fm_install .carry/s12/final)
R=/tmp/f6; mkdir -p $R
nvidia-smi --query-gpu=name --format=csv,noheader
for x in A1:$A B1:$B A2:$A B2:$B; do n=${x%%:*}; s=${x#*:}
  PYTHONPATH=$s timeout 150 python3 bench/python_overhead.py --json $R/overhead-$n.json > $R/overhead-$n.txt 2>&1; echo "$n rc=$?" >> $R/rc.txt; done
cd /tmp && tar czf $OUT/f6.tgz f6
cat f6/rc.txt
for n in A1 B1 A2 B2; do echo "== $n"; sed -n '/^Targets/,$p' f6/overhead-$n.txt | sed -n 3,14p | cut -c1-90; done
