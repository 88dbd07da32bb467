#!/usr/bin/env bash
# persist, GPU run 2 (final build; persistent CTAs on by default for window/documents at 128x128 d128):
# 1. selftest of the persistent cases on every geometry (3 CTAs: many tiles each)
# 2. compute-sanitizer memcheck/racecheck/synccheck: a persistent window call and a 64-token call
# 3. the suite's interleaved A/B, base12 (c647f90) vs this build, 3 ABBA pairs, the forward rows
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/persist_out}; mkdir -p "$OUT"
D=.carry/persist; T=/tmp/persist_bins2; mkdir -p $T/base $T/new
xz -dc .carry/base12/fragmask.xz > $T/base/fragmask; chmod +x $T/base/fragmask; echo c647f90 > $T/base/COMMIT
xz -dc $D/fragmask.xz > $T/new/fragmask; chmod +x $T/new/fragmask; cat $D/COMMIT > $T/new/COMMIT
N=$T/new/fragmask
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "new: $(cat $T/new/COMMIT)"

# ---- 1. persistent selftest cases (every geometry) ----
timeout 80 $N attention --selftest --cases persistent > $OUT/selftest_persistent.txt 2>&1; rc_st=$?; echo "selftest persistent rc=$rc_st t=$(el)"
grep -E "^FAIL" $OUT/selftest_persistent.txt | head -20; echo "PASS lines: $(grep -c '^PASS' $OUT/selftest_persistent.txt)"; tail -1 $OUT/selftest_persistent.txt

# ---- 2. sanitizers ----
san=()
run_san() {  # name tool args...
  local name=$1 tool=$2; shift 2
  [ $rc_st -eq 124 ] && return
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
grep -h "rel_err\|error" $OUT/san-pers-window-memcheck.txt $OUT/san-pers-64tok-memcheck.txt | head -4

# ---- 3. interleaved A/B, 3 pairs ----
left=$(( 232 - $(el) ))
ROWS='fwd\.(s16384\.(none|causal|window1024|docs12|random50)|s4096\.(none|causal)|s8192\.causal|wu002\.blocks(10|50)|d64\.s16384\.(none|causal))'
timeout $(( left + 30 )) python3 $D/suite/run.py --ab $T/base $T/new --interleave --rounds 3 --systems fragmask_cli \
   --only "^${ROWS}\$" --budget-s $left --out $OUT/ab > $OUT/ab.txt 2>&1; echo "ab rc=$? t=$(el)"
grep '^| \|^# skipped\|^# failed' $OUT/ab.txt | cut -c1-150
echo "total t=$(el)"
