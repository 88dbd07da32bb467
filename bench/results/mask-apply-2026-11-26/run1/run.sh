#!/usr/bin/env bash
# mask helper, GPU run 1 (1 GPU): forward mask apply on per-element masks.
# A = cf2fead (tile lists read two steps ahead), base = main's kernels (41f7677).
# D1/D2 = diagnostics on top of A (D1: no bit apply, wrong results; D2: words loaded, one compare).
# (The version that ran; binaries from .carry/mask/{base,A,D1,D2}, xz-compressed.)
set -u
M=.carry/mask
for b in base A D1 D2; do xz -dc $M/$b/fragmask.xz > $M/$b/fragmask && chmod +x $M/$b/fragmask; done
source bench/suite/device_env.sh
R=/tmp/mask1; rm -rf $R; mkdir -p $R/san
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee $R/device.txt
A=$M/A/fragmask
# 1. forward selftest, every case with tile lists (all geometries)
timeout 100 $A attention --selftest --cases blocks > $R/selftest_blocks.txt 2>&1; echo "selftest blocks rc=$? t=$(el)" >> $R/rc.txt
timeout 40 $A attention --selftest --cases split > $R/selftest_split.txt 2>&1; echo "selftest split rc=$? t=$(el)" >> $R/rc.txt
# 2. compute-sanitizer on the changed (tile-list) forwards: 128x128 random, split-KV random, 64x64 variable blocks
python3 - <<PY
import numpy as np
rng = np.random.default_rng(3)
H, Qb, Kb = 2, 8, 8
idx = np.zeros((H, Qb, Kb), np.int32); num = np.zeros((H, Qb), np.int32)
for h in range(H):
    for q in range(Qb):
        k = rng.choice(Kb, size=3, replace=False); idx[h, q, :3] = k; num[h, q] = 3
np.save("$R/san/idx.npy", idx); np.save("$R/san/num.npy", num)
np.save("$R/san/sizes.npy", rng.integers(48, 65, size=Kb).astype(np.int32))
PY
$A pack --blocks $R/san/idx.npy --blocks-num $R/san/num.npy --block-sizes $R/san/sizes.npy --seqlen-q 512 --seqlen-k 512 \
   --block 64x64 --warpgroups 1 -o $R/san/b64.safetensors -q; echo "pack b64 rc=$?" >> $R/rc.txt
cases=("fwd-random50|attention --random 1,2,2,512,512,128 --synthetic-mask random:0.5"
       "fwd-splitkv|attention --random 1,2,2,64,2048,128 --synthetic-mask random:0.5 --splits 4"
       "fwd-b64var|attention --random 1,2,2,512,512,128 --mask $R/san/b64.safetensors")
for c in "${cases[@]}"; do name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 99 $A $args > $R/san/$name-$tool.txt 2>&1; rc=$?
    echo "$name $tool rc=$rc $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san/$name-$tool.txt | tail -1)" >> $R/san/summary.txt
  done; done
echo "sanitize t=$(el)" >> $R/rc.txt
# 3. A/B base vs A, interleaved ABBA, the per-element and block-list forward rows
timeout 130 python3 bench/suite/run.py --ab $M/base $M/A --interleave --rounds 3 --systems fragmask_cli \
   --only '^fwd\.(s16384\.(random50|topk8|random10|none|blocksparse10)|wu002\.blocks(10|50))$' --budget-s 110 \
   --out $R/ab > $R/ab.txt 2>&1; echo "ab base-A rc=$? t=$(el)" >> $R/rc.txt
# 4. diagnostics: where the rest of the masked time goes (A vs D2 vs D1 on random50)
timeout 45 python3 bench/suite/run.py --ab $M/A $M/D2 --interleave --rounds 2 --systems fragmask_cli \
   --only '^fwd\.s16384\.random50$' --out $R/ab_d2 > $R/ab_d2.txt 2>&1; echo "ab A-D2 rc=$? t=$(el)" >> $R/rc.txt
timeout 45 python3 bench/suite/run.py --ab $M/A $M/D1 --interleave --rounds 2 --systems fragmask_cli \
   --only '^fwd\.s16384\.random50$' --out $R/ab_d1 > $R/ab_d1.txt 2>&1; echo "ab A-D1 rc=$? t=$(el)" >> $R/rc.txt
cd /tmp && tar czf $OUT/mask1.tgz mask1
