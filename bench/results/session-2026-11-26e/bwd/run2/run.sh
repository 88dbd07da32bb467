#!/usr/bin/env bash
# bwd run 2 (branch h/bwd, 1 GPU; run 1: run1.sh, RESULT1.txt). Builds (binaries xz-compressed):
#   base = 41f7677 (main's kernels)
#   v2   = 5a4baa8: fewer step-loop instructions + lse/Dsum as column pairs (LDS.64)
#   v5   = 10e4e69: v2 + head dim 64 holds K and V in registers (RS Sᵀ, dPᵀ); the early dV of run 1 reverted.
#          Head dims 128/256: the same SASS as v2.
# 1. backward selftest of v5; compute-sanitizer memcheck/racecheck/synccheck of v5 (D=64, D=128, D=256 cases), parallel
# 2. gradients base vs v5: D=128 none/causal, D=64 none/causal (4096)
# 3. interleaved A/B (ABBA pairs, 2 per row): base -> v5 on 11 backward rows; v2 -> v5 on the 2 head-dim-64 rows
set -u
source bench/suite/device_env.sh
D=.carry/bwd
for v in base v2 v5; do xz -dc $D/$v/fragmask.xz > $D/$v/fragmask && chmod +x $D/$v/fragmask; done
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
echo "base $(cat $D/base/COMMIT)  v2 $(cat $D/v2/COMMIT)  v5 $(cat $D/v5/COMMIT)"
mkdir -p $OUT/san $OUT/self
timeout 200 $D/v5/fragmask attention --backward --selftest > $OUT/self/v5.txt 2>&1 &
run_san() {  # variant tool name args...
  local v=$1 tool=$2 name=$3; shift 3
  local log=$OUT/san/$v-$name-$tool.txt rc s
  timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 99 $D/$v/fragmask "$@" > "$log" 2>&1
  rc=$?
  s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)
  printf '%-4s %-18s %-9s rc=%-3s %s\n' "$v" "$name" "$tool" "$rc" "${s:-no summary}" > "$log.sum"
}
cases=(
  "none-512|attention --random 1,2,2,512,512,128 --backward"
  "causal-br-300x420|attention --random 1,2,2,300,420,128 --backward --causal --diag-offset 120"
  "random50-512|attention --random 1,2,2,512,512,128 --backward --synthetic-mask random:0.5"
  "d64-none-512|attention --random 1,2,2,512,512,64 --backward"
  "d64-causal-300|attention --random 1,2,2,300,300,64 --backward --causal"
  "d64-gqa-333x190|attention --random 1,4,2,333,190,64 --backward"
  "d64-det-causal-512|attention --random 1,2,2,512,512,64 --backward --causal --deterministic"
  "d64-random50-512|attention --random 1,2,2,512,512,64 --backward --synthetic-mask random:0.5"
  "d64-blocks64-512|attention --random 1,2,2,512,512,64 --backward --synthetic-mask random:0.5 --block 64x64"
  "d256-causal-512|attention --random 1,2,2,512,512,256 --backward --causal"
)
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    # shellcheck disable=SC2086
    run_san v5 $tool $name $args &
    while [ "$(jobs -rp | wc -l)" -ge 12 ]; do wait -n; done
  done
done
wait
echo "selftests + sanitizers t=$(el)"
echo "selftest v5: $(tail -1 $OUT/self/v5.txt)"; grep -E "^FAIL" $OUT/self/v5.txt | head -10
cat $OUT/san/*.sum | sort
for f in $OUT/san/*racecheck.txt; do
  if grep -q "Race reported" "$f"; then echo "-- $(basename $f):"; grep -m 3 -A 3 "Race reported" "$f" | cut -c1-200; fi
done
for f in $OUT/san/*.txt; do
  if ! grep -q "SUMMARY" "$f"; then echo "-- $(basename $f): $(head -3 $f | cut -c1-200)"; fi
done

for g in "d128-none|1,8,8,4096,4096,128|" "d128-causal|1,8,8,4096,4096,128|--causal" \
         "d64-none|1,8,8,4096,4096,64|" "d64-causal|1,8,8,4096,4096,64|--causal"; do
  IFS='|' read -r m shp a <<< "$g"
  for v in base v5; do
    # shellcheck disable=SC2086
    timeout 60 $D/$v/fragmask attention --random $shp --backward $a --out $OUT/g-$m-$v.safetensors > $OUT/g-$m-$v.log 2>&1 \
      || echo "grad run $m $v failed: $(tail -2 $OUT/g-$m-$v.log)"
  done
done
python3 - "$OUT" <<'PYEOF'
import json, struct, sys
import numpy as np
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k == '__metadata__': continue
        s, e = v['data_offsets']
        u = np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.uint16).astype(np.uint32) << 16
        out[k] = u.view(np.float32).astype(np.float64)
    return out
for m in ('d128-none', 'd128-causal', 'd64-none', 'd64-causal'):
    try:
        a, c = load(f"{sys.argv[1]}/g-{m}-base.safetensors"), load(f"{sys.argv[1]}/g-{m}-v5.safetensors")
        r = {k: float(np.linalg.norm(a[k] - c[k]) / max(np.linalg.norm(a[k]), 1e-30)) for k in ('dq', 'dk', 'dv')}
        bad = sum(int((~np.isfinite(c[k])).sum()) for k in ('dq', 'dk', 'dv'))
        ok = bad == 0 and max(r.values()) < 1e-3
        print(f"{'OK  ' if ok else 'BAD '} v5 vs base {m}: rel L2 dq {r['dq']:.2e} dk {r['dk']:.2e} dv {r['dv']:.2e}; non-finite {bad}")
    except Exception as e:
        print(f"BAD  v5 vs base {m}: compare failed: {e}")
PYEOF
rm -f $OUT/g-*.safetensors
echo "gradients t=$(el)"

R='^bwd\.(s16384\.(none|causal|window1024|random50|docs12)|s8192\.(none|docs12)|d64\.s16384\.(none|causal)|gqa\.s16384\.causal|wu002\.blocks10)$'
R2='^bwd\.d64\.s16384\.(none|causal)$'
mkdir -p $OUT/ab1 $OUT/ab2
timeout 175 python3 bench/suite/run.py --ab $D/base $D/v5 --interleave --rounds 2 --systems fragmask_cli --only "$R" \
  --budget-s 150 --out $OUT/ab1 > $OUT/ab1/log.txt 2>&1; echo "ab1 base->v5 rc=$? t=$(el)"
timeout 40 python3 bench/suite/run.py --ab $D/v2 $D/v5 --interleave --rounds 2 --systems fragmask_cli --only "$R2" \
  --budget-s 32 --out $OUT/ab2 > $OUT/ab2/log.txt 2>&1; echo "ab2 v2->v5 rc=$? t=$(el)"
rm -f $D/*/fragmask
echo "== A/B 1: A = base $(cat $D/base/COMMIT), B = v5 $(cat $D/v5/COMMIT) (B/A below 1: B faster)"
grep -E "^\| (workload|bwd|---)" $OUT/ab1/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab1/log.txt | head -5
echo "== A/B 2: A = v2 $(cat $D/v2/COMMIT), B = v5 $(cat $D/v5/COMMIT)"
grep -E "^\| (workload|bwd|---)" $OUT/ab2/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab2/log.txt | head -5
echo "== correctness summary"
echo "selftest v5: $(tail -1 $OUT/self/v5.txt)"
echo "sanitizer runs: $(cat $OUT/san/*.sum | wc -l), not clean: $(cat $OUT/san/*.sum | grep -vcE 'rc=0 +(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)')"
echo "total t=$(el)"
cd $OUT && tar czf bwd-run2.tgz san self ab1 ab2 g-*.log 2>/dev/null; rm -rf san ab1 ab2
