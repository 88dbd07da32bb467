export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
for i in 1 2 3; do
  for b in fragmask_prev fragmask; do
    for m in "" "--synthetic-mask random:0.5"; do
      r=$(.carry/$b bench attention --random 1,16,16,16384,16384,128 --json --warmup 10 --iters 30 $m | tail -1 | python3 -c "import json,sys; print(json.load(sys.stdin)['ms_median'])")
      echo "$i $b [$m] $r"
    done
  done
done
