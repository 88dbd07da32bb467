#!/usr/bin/env bash
# Planes per deterministic section with the walk orders, one step below call5's: 1 against 2
# at S = 16384, 2 against 4 at S = 8192, 4 against 8 at S = 4096 (16384 query rows against
# 32768); 3 interleaved rounds.
source bench/suite/device_env.sh
K=.carry/k43c; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
for r in 0 1 2; do
  for case in "16384 blocksparse:0.1:0.5 1 2" "16384 blocksparse:0.5:0.5 1 2" "8192 blocksparse:0.1:0.5 2 4" "8192 blocksparse:0.5:0.5 2 4" "4096 blocksparse:0.1:0.5 4 8"; do
    set -- $case; secs="$3 $4"; [ $((r % 2)) -eq 1 ] && secs="$4 $3"
    for sec in $secs; do
      ms=$(timeout 60 $F bench backward --random 1,16,16,$1,$1,128 --json --warmup 5 --iters 20 --synthetic-mask $2 --deterministic --head-section $sec | tail -1 | python3 -c "import json,sys; print(round(json.load(sys.stdin)['ms_median'],4))")
      echo "round $r S=$1 $2 section $sec $ms" | tee -a $R/sections.txt
    done
  done
done
