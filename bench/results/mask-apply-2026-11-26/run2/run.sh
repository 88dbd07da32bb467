#!/usr/bin/env bash
# mask helper, GPU run 2 (1 GPU, ~5 min): forward mask apply on per-element masks.
# base = main's kernels (41f7677); A = cf2fead (tile lists read ahead; run 1: random50 0.974, blocks50 0.943);
# W = 55a0702 = A + the mask words applied inside the softmax (predicated FMNMX via R2P, select after exp2);
# WC = W + the row max as 4 partial maxima per row slot (softmax, every forward; informational).
set -u
M=.carry/mask
for b in base A W WC; do xz -dc $M/$b/fragmask.xz > $M/$b/fragmask && chmod +x $M/$b/fragmask; done
source bench/suite/device_env.sh
R=/tmp/mask2; rm -rf $R; mkdir -p $R/san
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee $R/device.txt
ab() {  # ab LABEL BUILD_A BUILD_B PAIRS BUDGET ONLY
  timeout $(( $5 + 40 )) python3 bench/suite/run.py --ab $M/$2 $M/$3 --interleave --rounds $4 --systems fragmask_cli \
    --budget-s $5 --only "$6" --out $R/$1 > $R/$1.txt 2>&1; echo "ab $1 rc=$? t=$(el)" >> $R/rc.txt
}
# 1. W vs A on the tile-list rows (decides the final build)
ab w_vs_a A W 3 60 '^fwd\.(s16384\.(random50|topk8)|wu002\.blocks(10|50))$'
# 2. WC vs W (the partial maxima), no mask and random 50%
ab wc_vs_w W WC 2 20 '^fwd\.s16384\.(none|random50)$'
# 3. the final build: W unless it is not faster than A on random50 or slower on blocks10
F=W
python3 - "$R/w_vs_a" <<'PY' || F=A
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/ab-*.json")[0]))
r = {row["key"][0]: row["ratio"] for row in d["rows"]}
print("W/A", r)
ok = (r.get("fwd.s16384.random50") or 9) < 0.985 and (r.get("fwd.wu002.blocks10") or 9) < 1.02
sys.exit(0 if ok else 1)
PY
echo "final=$F t=$(el)" >> $R/rc.txt
# 4. the whole forward table, base vs final, one ABBA pair per row
ab fwd_base_vs_final base $F 1 150 '^fwd'
# 5. forward selftest (tile-list and split cases: the kernels W changes) and compute-sanitizer on the final build
B=$M/$F/fragmask
if [ $F = W ]; then
  timeout 60 $B attention --selftest --cases blocks > $R/selftest_blocks.txt 2>&1; echo "selftest blocks rc=$? t=$(el)" >> $R/rc.txt
  timeout 25 $B attention --selftest --cases split > $R/selftest_split.txt 2>&1; echo "selftest split rc=$? t=$(el)" >> $R/rc.txt
fi
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
$B pack --blocks $R/san/idx.npy --blocks-num $R/san/num.npy --block-sizes $R/san/sizes.npy --seqlen-q 512 --seqlen-k 512 \
   --block 64x64 --warpgroups 1 -o $R/san/b64.safetensors -q; echo "pack b64 rc=$?" >> $R/rc.txt
cases=("fwd-random50|attention --random 1,2,2,512,512,128 --synthetic-mask random:0.5"
       "fwd-splitkv|attention --random 1,2,2,64,2048,128 --synthetic-mask random:0.5 --splits 4"
       "fwd-b64var|attention --random 1,2,2,512,512,128 --mask $R/san/b64.safetensors")
for c in "${cases[@]}"; do name=${c%%|*}; args=${c#*|}
  tools="memcheck"; [ $name = fwd-random50 ] && tools="memcheck racecheck synccheck"
  for tool in $tools; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $B $args > $R/san/$name-$tool.txt 2>&1; rc=$?
    echo "$name $tool rc=$rc $(grep -o '\(ERROR\|RACECHECK\) SUMMARY: .*' $R/san/$name-$tool.txt | tail -1)" >> $R/san/summary.txt
  done; done
echo "sanitize t=$(el)" >> $R/rc.txt
cd /tmp && tar czf $OUT/mask2.tgz mask2
cat $R/device.txt $R/rc.txt
tail -1 $R/selftest_blocks.txt 2>/dev/null; tail -1 $R/selftest_split.txt 2>/dev/null; grep -c PASS $R/selftest_*.txt 2>/dev/null; grep FAIL $R/selftest_*.txt 2>/dev/null | head -5
cat $R/san/summary.txt
for f in w_vs_a wc_vs_w fwd_base_vs_final; do echo "== $f"; grep '^| \|^# [a-z]' $R/$f.txt | head -45; done
