#!/usr/bin/env bash
# The pair walks' fill threshold from both sides (h/pair-walks-on, --deterministic-walks on
# walks every plane): write-up 002's deterministic backward at 30-60% kept, walks forced on
# and off against the default (walked where the pairs fill at most 60%), 2 ABBA pairs.
source bench/suite/device_env.sh
K=.carry/k44e; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $F attention --backward --selftest --cases "deterministic [64x64] paired" > $R/guard.txt 2>&1; rc=$?; echo "guard rc=$rc $(grep -c '^PASS' $R/guard.txt) pass"; [ $rc -eq 0 ] || exit 1
for f in 0.3 0.35 0.4 0.45 0.5 0.6; do
  timeout 90 python3 -m bench.suite.flag_pairs $F 'bwd[.]wu002[.]blocks10[.]det$' 2 "--deterministic-walks on" "--deterministic-walks off" --set mask=blocks64:$f >> $R/fill.txt 2>&1; echo "kept $f rc=$?"
done
cut -c1-150 $R/fill.txt
