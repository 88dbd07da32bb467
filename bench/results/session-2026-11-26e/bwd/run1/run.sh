#!/usr/bin/env bash
# bwd run 1 (branch h/bwd, 1 GPU). Builds (binaries xz-compressed in .carry/bwd/*/fragmask.xz):
#   base = 41f7677 (main's kernels)
#   v1   = 74f9bb2: fewer step-loop instructions (descriptors from fm_desc bases, unmasked step range once per
#          schedule, dS stmatrix addresses as offset ^ constant, unsigned stage counters)
#   v2   = 5a4baa8: v1 + lse/Dsum read as column pairs (LDS.64)
#   v3   = ce8869a: v2 + dV issued before the dP wait
# 1. backward selftest of v1, v2, v3; compute-sanitizer memcheck/racecheck/synccheck of v3 (D=128, D=64, D=256 cases), parallel
# 2. gradients base vs v3 at 1,8,8,4096,4096,128 (none, causal, random50)
# 3. interleaved A/B (ABBA pairs, 2 per row): base -> v3 on 10 backward rows; v2 -> v3 and v1 -> v2 on 3 rows each
set -u
source bench/suite/device_env.sh
D=.carry/bwd
for v in base v1 v2 v3; do xz -dc $D/$v/fragmask.xz > $D/$v/fragmask && chmod +x $D/$v/fragmask; done
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "base $(cat $D/base/COMMIT)  v1 $(cat $D/v1/COMMIT)  v2 $(cat $D/v2/COMMIT)  v3 $(cat $D/v3/COMMIT)"
mkdir -p $OUT/san $OUT/self
for v in v1 v2 v3; do
  timeout 200 $D/$v/fragmask attention --backward --selftest > $OUT/self/$v.txt 2>&1 &
done
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
  "causal-512|attention --random 1,2,2,512,512,128 --backward --causal"
  "window-300|attention --random 1,2,2,300,300,128 --backward --window 64,0"
  "causal-br-300x420|attention --random 1,2,2,300,420,128 --backward --causal --diag-offset 120"
  "random50-512|attention --random 1,2,2,512,512,128 --backward --synthetic-mask random:0.5"
  "gqa-333x190|attention --random 1,4,2,333,190,128 --backward"
  "det-causal-512|attention --random 1,2,2,512,512,128 --backward --causal --deterministic"
  "d64-none-512|attention --random 1,2,2,512,512,64 --backward"
  "d64-causal-300|attention --random 1,2,2,300,300,64 --backward --causal"
  "d256-causal-512|attention --random 1,2,2,512,512,256 --backward --causal"
)
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    # shellcheck disable=SC2086
    run_san v3 $tool $name $args &
    while [ "$(jobs -rp | wc -l)" -ge 12 ]; do wait -n; done
  done
done
wait
echo "selftests + sanitizers t=$(el)"
for v in v1 v2 v3; do echo "selftest $v: $(tail -1 $OUT/self/$v.txt)"; grep -E "^FAIL" $OUT/self/$v.txt | head -10; done
cat $OUT/san/*.sum | sort
for f in $OUT/san/*racecheck.txt; do
  if grep -q "Race reported" "$f"; then echo "-- $(basename $f):"; grep -m 3 -A 3 "Race reported" "$f" | cut -c1-200; fi
done
for f in $OUT/san/*.txt; do
  if grep -qiE "unrecognized|unknown option|error: " "$f" && ! grep -q "SUMMARY" "$f"; then echo "-- $(basename $f): $(head -3 $f)"; fi
done

shp=1,8,8,4096,4096,128
for m in none causal random50; do
  case $m in none) a=() ;; causal) a=(--causal) ;; random50) a=(--synthetic-mask random:0.5) ;; esac
  for v in base v3; do
    timeout 60 $D/$v/fragmask attention --random $shp --backward ${a[@]+"${a[@]}"} --out $OUT/g-$m-$v.safetensors > $OUT/g-$m-$v.log 2>&1 \
      || echo "grad run $m $v failed: $(tail -2 $OUT/g-$m-$v.log)"
  done
done
python3 - "$OUT" "$shp" <<'PYEOF'
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
for m in ('none', 'causal', 'random50'):
    try:
        a, c = load(f"{sys.argv[1]}/g-{m}-base.safetensors"), load(f"{sys.argv[1]}/g-{m}-v3.safetensors")
        r = {k: float(np.linalg.norm(a[k] - c[k]) / max(np.linalg.norm(a[k]), 1e-30)) for k in ('dq', 'dk', 'dv')}
        bad = sum(int((~np.isfinite(c[k])).sum()) for k in ('dq', 'dk', 'dv'))
        ok = bad == 0 and max(r.values()) < 1e-3
        print(f"{'OK  ' if ok else 'BAD '} v3 vs base {m} {sys.argv[2]}: rel L2 dq {r['dq']:.2e} dk {r['dk']:.2e} dv {r['dv']:.2e}; non-finite {bad}")
    except Exception as e:
        print(f"BAD  v3 vs base {m}: compare failed: {e}")
PYEOF
rm -f $OUT/g-*.safetensors
echo "gradients t=$(el)"

R='^bwd\.(s16384\.(none|causal|random50|docs12|window1024)|s8192\.none|d64\.s16384\.none|d256\.s16384\.none|gqa\.s16384\.causal|wu002\.blocks10)$'
R2='^bwd\.(s16384\.none|s8192\.none|d64\.s16384\.none)$'
mkdir -p $OUT/ab1 $OUT/ab2 $OUT/ab3
timeout 160 python3 bench/suite/run.py --ab $D/base $D/v3 --interleave --rounds 2 --systems fragmask_cli --only "$R" \
  --budget-s 140 --out $OUT/ab1 > $OUT/ab1/log.txt 2>&1; echo "ab1 base->v3 rc=$? t=$(el)"
timeout 50 python3 bench/suite/run.py --ab $D/v2 $D/v3 --interleave --rounds 2 --systems fragmask_cli --only "$R2" \
  --budget-s 40 --out $OUT/ab2 > $OUT/ab2/log.txt 2>&1; echo "ab2 v2->v3 rc=$? t=$(el)"
timeout 50 python3 bench/suite/run.py --ab $D/v1 $D/v2 --interleave --rounds 2 --systems fragmask_cli --only "$R2" \
  --budget-s 40 --out $OUT/ab3 > $OUT/ab3/log.txt 2>&1; echo "ab3 v1->v2 rc=$? t=$(el)"
rm -f $D/*/fragmask
echo "== A/B 1: A = base $(cat $D/base/COMMIT), B = v3 $(cat $D/v3/COMMIT) (B/A below 1: B faster)"
grep -E "^\| (workload|bwd|---)" $OUT/ab1/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab1/log.txt | head -5
echo "== A/B 2: A = v2 $(cat $D/v2/COMMIT), B = v3 $(cat $D/v3/COMMIT)"
grep -E "^\| (workload|bwd|---)" $OUT/ab2/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab2/log.txt | head -5
echo "== A/B 3: A = v1 $(cat $D/v1/COMMIT), B = v2 $(cat $D/v2/COMMIT)"
grep -E "^\| (workload|bwd|---)" $OUT/ab3/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab3/log.txt | head -5
echo "== correctness summary"
for v in v1 v2 v3; do echo "selftest $v: $(tail -1 $OUT/self/$v.txt)"; done
echo "sanitizer runs: $(cat $OUT/san/*.sum | wc -l), not clean: $(cat $OUT/san/*.sum | grep -vcE 'rc=0 +(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)')"
echo "total t=$(el)"
cd $OUT && tar czf bwd-run1.tgz san self ab1 ab2 ab3 g-*.log 2>/dev/null; rm -rf san ab1 ab2 ab3
