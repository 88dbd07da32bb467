#!/usr/bin/env bash
# vsa2 run 2 (last): shared K/V of the 64-token tile (64x64/2x2, h/vsa). Selftest; compute-sanitizer
# memcheck/racecheck/synccheck on the shared tile; B's variants on the VSA masks (shared off/on,
# stages, serial), interleaved with A (main 59d581c); the suite's interleaved A/B (run.py --ab
# --interleave) on the wu002 rows and other list rows; the Python package's 64-token GPU tests.
set -u
C=.carry/vsa2
source bench/suite/device_env.sh
R=/tmp/vsa2; mkdir -p $R/base $R/new
xz -dc .carry/s12/final/fragmask.xz > $R/base/fragmask && chmod +x $R/base/fragmask && cp .carry/s12/final/COMMIT $R/base/
xz -dc $C/new/fragmask.xz > $R/new/fragmask && chmod +x $R/new/fragmask && cp $C/new/COMMIT $R/new/
A=$R/base/fragmask; B=$R/new/fragmask
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
echo "A $(cat $R/base/COMMIT)  B $(cat $R/new/COMMIT)" | tee -a $OUT/device.txt
T0=$(date +%s); el() { echo "t=$(( $(date +%s) - T0 ))s $*"; }
# 1. selftest of the shared-K/V tile (every case it runs) and the 64-token cases on 64x64/2
timeout 50 $B attention --selftest --block 64x64/2x2 > $OUT/selftest_shared.txt 2>&1; echo "selftest 64x64/2x2 rc=$?" | tee -a $OUT/rc.txt
timeout 20 $B attention --selftest --block 64x64 --cases 64-token > $OUT/selftest_64.txt 2>&1; echo "selftest 64x64 64-token rc=$?" | tee -a $OUT/rc.txt
el selftests
# 2. sanitizers on the shared tile: partial words + odd query blocks (GQA), and a full-blocks VSA mask
python3 - <<'EOF'
import numpy as np
rng = np.random.default_rng(7)
def lists(h, qb, kb, frac, name):
    k = max(1, round(frac * kb))
    idx = np.sort(np.argsort(rng.random((h, qb, kb)), axis=-1)[..., :k], axis=-1).astype(np.int32)
    np.save(f"/tmp/vsa2/idx{name}.npy", idx)
    np.save(f"/tmp/vsa2/num{name}.npy", np.full((h, qb), k, np.int32))
lists(12, 364, 364, 0.1, "10")
lists(12, 364, 364, 0.5, "50")
lists(2, 9, 9, 0.3, "small")   # 576 x 576 tokens
np.save("/tmp/vsa2/sizes.npy", rng.integers(48, 65, 364).astype(np.int32))
EOF
$B pack --blocks $R/idxsmall.npy --blocks-num $R/numsmall.npy --seqlen-q 576 --seqlen-k 576 --block 64x64 --warpgroups 1 -o $R/small.safetensors -q; echo "pack small rc=$?"
for f in 10 50; do
  $B pack --blocks $R/idx$f.npy --blocks-num $R/num$f.npy --seqlen-q 23296 --seqlen-k 23296 --block 64x64 --warpgroups 1 -o $R/m$f.safetensors -q; echo "pack $f rc=$?"
done
for tool in memcheck racecheck synccheck; do
  timeout 25 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --random 1,4,2,900,700,128 --block 64x64/2x2 --synthetic-mask random:0.3 > $OUT/san_words_$tool.txt 2>&1; echo "$tool words rc=$?" | tee -a $OUT/rc.txt
  timeout 25 compute-sanitizer --tool $tool --error-exitcode 99 $B attention --random 1,2,2,576,576,128 --mask $R/small.safetensors --shared-kv on > $OUT/san_vsa_$tool.txt 2>&1; echo "$tool vsa rc=$?" | tee -a $OUT/rc.txt
done
el sanitizers
# 3. the suite's interleaved A/B (ABBA pairs): the wu002 forward rows (2 pairs), then other list rows (1 pair)
mkdir -p $R/abA $R/abB && cp $A $R/base/COMMIT $R/abA/ && cp $B $R/new/COMMIT $R/abB/
timeout 90 python3 bench/suite/run.py --ab $R/abA $R/abB --interleave --rounds 2 --systems fragmask_cli \
  --only '^fwd[.]wu002[.]blocks(10|50|10v|50v)$' --out $OUT > $OUT/ab_wu002.txt 2>&1; echo "ab wu002 rc=$?" | tee -a $OUT/rc.txt
el ab wu002
left=$(( 170 - ($(date +%s) - T0) ))
[ $left -gt 20 ] && timeout $left python3 bench/suite/run.py --ab $R/abA $R/abB --interleave --rounds 1 --systems fragmask_cli \
  --only '^(fwd[.]s16384[.](random50|topk8|blocksparse10)|split[.]wu002[.]blocks10|bwd[.]wu002[.]blocks10)$' \
  --out $OUT > $OUT/ab_other.txt 2>&1; echo "ab other rc=$?" | tee -a $OUT/rc.txt
el ab other
# 4. B's variants on the VSA masks beside A, one round (ms from the last JSON line)
bench() {
  local log=$R/last.txt
  "$@" attention --random 1,12,12,23296,23296,128 --bench --json --warmup 5 --iters 30 > $log 2>&1
  python3 -c "
import json,sys
lines=[l for l in open('$log') if l.startswith('{')]
j=json.loads(lines[-1]); print('%.4f(%s)' % (j['ms_median'], j['geometry']))" 2>/dev/null || { echo fail; tail -3 $log >> $OUT/bench_errors.txt; }
}
for m in m10 m50; do
  [ $(( $(date +%s) - T0 )) -gt 205 ] && break
  a=$(bench $A --mask $R/$m.safetensors)
  off=$(bench $B --mask $R/$m.safetensors --shared-kv off)
  on=$(bench $B --mask $R/$m.safetensors)
  s2=$(bench $B --mask $R/$m.safetensors --shared-kv on --stages 2)
  ser=$(bench $B --mask $R/$m.safetensors --shared-kv on --no-overlap)
  echo "$m: A $a | B off $off | B shared(default) $on | B shared stages2 $s2 | B shared serial $ser" | tee -a $OUT/times.txt
  el $m
done
# 5. the Python package's 64-token GPU tests (the default picks the shared tile for these masks)
left=$(( 232 - ($(date +%s) - T0) ))
if [ $left -gt 15 ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/fm_vsa2 $C/fragmask-*.whl
  ( cd crates/python/tests && PYTHONPATH=/tmp/fm_vsa2 FRAGMASK_BIN=$B timeout $left python3 -m unittest -k 64_token -k outputs_equal -k fp16_matches test_gpu > $OUT/py.txt 2>&1; echo "py rc=$?" | tee -a $OUT/rc.txt )
fi
el done
echo "==== summary"
cat $OUT/rc.txt
echo "selftest shared: $(grep -c '^PASS' $OUT/selftest_shared.txt) PASS, $(tail -1 $OUT/selftest_shared.txt)"; grep "^FAIL" $OUT/selftest_shared.txt | head -5
tail -1 $OUT/selftest_64.txt
grep -ho "\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*" $OUT/san_*.txt
cat $OUT/times.txt
head -5 $OUT/bench_errors.txt 2>/dev/null
grep -h "^|" $OUT/ab_wu002.txt $OUT/ab_other.txt; grep -hi "fail" $OUT/ab_wu002.txt $OUT/ab_other.txt | head -5
grep -E "^(Ran|OK|FAILED)" $OUT/py.txt 2>/dev/null
