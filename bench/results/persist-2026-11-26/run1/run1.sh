#!/usr/bin/env bash
# persist, GPU run 1: persistent CTAs of the forward (h/persist). 1. selftest of the persistent cases
# 2. compute-sanitizer on a persistent window call and a 64-token call (several tiles per CTA)
# 3. three-way interleaved timing: base12 | this build --persistent off | --persistent on
# 4. the whole forward selftest with the time left.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/persist_out}; mkdir -p "$OUT"
D=.carry/persist; T=/tmp/persist_bins; mkdir -p $T/base $T/new
xz -dc .carry/base12/fragmask.xz > $T/base/fragmask; chmod +x $T/base/fragmask; echo c647f90 > $T/base/COMMIT
xz -dc $D/fragmask.xz > $T/new/fragmask; chmod +x $T/new/fragmask; cat $D/COMMIT > $T/new/COMMIT
N=$T/new/fragmask
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "new: $(cat $T/new/COMMIT)"

# ---- 1. persistent selftest cases (every geometry) ----
timeout 80 $N attention --selftest --cases persistent > $OUT/selftest_persistent.txt 2>&1; rc_st=$?; echo "selftest persistent rc=$rc_st t=$(el)"
grep -E "FAIL" $OUT/selftest_persistent.txt | head -20; grep -c "^PASS" $OUT/selftest_persistent.txt; tail -1 $OUT/selftest_persistent.txt

# ---- 2. sanitizers (skipped if the persistent selftest hung) ----
SIDES=base,off,on
if [ $rc_st -eq 124 ]; then echo "persistent selftest timed out: no sanitizers, no --persistent on timing"; SIDES=base,off; fi
san=()
run_san() {  # name tool args...
  local name=$1 tool=$2; shift 2
  [ $SIDES = base,off ] && return
  timeout 40 compute-sanitizer --tool "$tool" --error-exitcode 99 $N "$@" > $OUT/san-$name-$tool.txt 2>&1
  local rc=$? s
  s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/san-$name-$tool.txt | tail -1)
  san+=("$(printf '%-18s %-9s rc=%-3s %s' "$name" "$tool" "$rc" "${s:-no summary}")")
}
for tool in memcheck racecheck synccheck; do
  run_san pers-window $tool attention --random 1,2,2,512,512,128 --window 128,0 --persistent on --persistent-ctas 2
  run_san pers-64tok $tool attention --random 1,2,2,512,512,128 --block 64x64 --synthetic-mask random:0.5 --persistent on --persistent-ctas 3
done
echo "sanitizers t=$(el)"
printf '%s\n' "${san[@]}"
grep -h "rel_err\|PASS\|FAIL\|error" $OUT/san-pers-window-memcheck.txt $OUT/san-pers-64tok-memcheck.txt | head -6

# ---- 3. three-way timing ----
ROWS=fwd.s16384.window1024,fwd.wu002.blocks10,fwd.s4096.causal,fwd.s4096.none,fwd.s16384.docs12,fwd.s8192.causal,fwd.s16384.causal,fwd.s16384.none,fwd.wu002.blocks50,fwd.d64.s16384.causal,fwd.d64.s16384.none,fwd.s16384.random50
left=$(( 215 - $(el) ))
SIDES=$SIDES ROUNDS=2 timeout $(( left + 40 )) python3 $D/threeway.py $T/base/fragmask $N $OUT/threeway.json $left $ROWS > $OUT/threeway.txt 2>&1
echo "threeway rc=$? t=$(el)"
grep "^|" $OUT/threeway.txt; grep -i "fail\|skipped\|Error" $OUT/threeway.txt | head -5

# ---- 4. whole forward selftest, time permitting ----
left=$(( 235 - $(el) ))
if [ $left -gt 20 ]; then
  timeout $left $N attention --selftest > $OUT/selftest.txt 2>&1; echo "selftest rc=$? t=$(el)"
  grep -c "^PASS" $OUT/selftest.txt; grep "^FAIL" $OUT/selftest.txt | head; tail -1 $OUT/selftest.txt
fi
echo "total t=$(el)"
