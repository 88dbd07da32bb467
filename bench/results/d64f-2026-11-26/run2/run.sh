#!/usr/bin/env bash
# d64f run 2: h/d64f (COMMIT) against base12 (c647f90). The change: head dim 64 calls with no mask
# run a 192x192 tile with P through shared memory (window mode only), and every forward kernel
# defaults to lazy rescale. 1. selftests  2. sanitizers on the 192x192 kernel  3. variants of one
# binary  4. interleaved A/B (run.py --ab --interleave) on the D=64 / D=256 / D=128 s16384 rows.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/d64f_out}; mkdir -p "$OUT"
C=.carry/d64f; mkdir -p /tmp/d64f/A /tmp/d64f/B
xz -dc .carry/base12/fragmask.xz > /tmp/d64f/A/fragmask; cp .carry/base12/COMMIT /tmp/d64f/A/COMMIT
xz -dc $C/fragmask.xz > /tmp/d64f/B/fragmask; cp $C/COMMIT /tmp/d64f/B/COMMIT
chmod +x /tmp/d64f/A/fragmask /tmp/d64f/B/fragmask
N=/tmp/d64f/B/fragmask
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "A=$(cat /tmp/d64f/A/COMMIT) B=$(cat /tmp/d64f/B/COMMIT)"; nvidia-smi --query-gpu=name --format=csv,noheader
st() { local n=$1 t=$2; shift 2
  timeout $t $N attention --selftest "$@" > $OUT/selftest-$n.txt 2>&1; local rc=$?
  echo "selftest $n rc=$rc cases=$(grep -c '^PASS\|^FAIL' $OUT/selftest-$n.txt) t=$(el)"; grep -E "^FAIL|rror" $OUT/selftest-$n.txt | head -4; tail -1 $OUT/selftest-$n.txt; }
st 192x192 40 --block 192x192
st 128x80 35 --block 128x80
for tool in memcheck racecheck synccheck; do for f in "--causal --block 192x192"; do
  timeout 30 compute-sanitizer --tool $tool --error-exitcode 99 $N attention --random 1,2,2,512,700,64 $f > $OUT/san-$tool.txt 2>&1
  echo "$tool D=64 $f rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/san-$tool.txt | tail -1) t=$(el)"
done; done
timeout 45 python3 $C/variants.py $OUT/variants.json 30 2> $OUT/variants.err | tee $OUT/variants.txt | tail -11
timeout 150 python3 bench/suite/run.py --ab /tmp/d64f/A /tmp/d64f/B --interleave --rounds 2 --systems fragmask_cli \
  --only '^fwd[.](d64|d256)[.]|^fwd[.]s16384[.](none|causal)$' --iters 10 --warmup 3 --budget-s 125 --out $OUT/ab > $OUT/ab.log 2>&1
echo "ab rc=$? t=$(el)"; tail -22 $OUT/ab.log
