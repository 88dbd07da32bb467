#!/usr/bin/env bash
# The backward's cost per CTA beyond its steps: the causal sliding window's backward at six
# widths (S=16384, H=16, D=128; 2048 key tiles, one CTA each), 3 interleaved rounds, for a
# linear fit of time against steps per key tile (ad60bfd; HEAD's kernels). DIR=k45c.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm.xz fm "$(cat $K/COMMIT)"; B=/tmp/fm/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
for round in 1 2 3; do
  for w in 128 256 512 1024 2048 4096; do
    timeout 60 $B attention --backward --random 1,16,16,16384,16384,128 --window $w,0 --bench --warmup 5 --iters 20 > $R/w$w-r$round.txt 2>&1
    echo "w=$w round=$round rc=$? $(grep -o 'median [0-9.]* ms' $R/w$w-r$round.txt | tail -1)"
  done
done | tee $R/summary.txt
grep -h "kernel\|tiles visited\|steps" $R/w1024-r1.txt | head -8
