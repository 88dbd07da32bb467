#!/usr/bin/env bash
# bdocs run (branch h/bdocs, 1 GPU): the backward's documents grid. Builds (binaries xz-compressed):
#   base = 49fbf1b (main's backward: documents run the tile lists)
#   new  = h/bdocs HEAD (see new/COMMIT): one CTA per (document, key tile), key tiles aligned to the document start
# 1. backward selftest of new (incl. the documents cases, which fail unless the documents grid ran);
#    compute-sanitizer memcheck/racecheck/synccheck of new on three documents backward cases, in parallel
# 2. gradients base vs new on documents shapes (rel L2 < 1e-3)
# 3. interleaved A/B (ABBA, 2 rounds): base -> new, the two docs12 rows first, then every other bwd row
set -u
source bench/suite/device_env.sh
D=.carry/bdocs
for v in base new; do xz -dc $D/$v/fragmask.xz > $D/$v/fragmask && chmod +x $D/$v/fragmask; done
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
echo "base $(cat $D/base/COMMIT)  new $(cat $D/new/COMMIT)"
mkdir -p $OUT/san $OUT/self $OUT/m
# Document ids: ragged lengths (steps straddling documents, one-token documents).
python3 - "$OUT/m" <<'PYEOF'
import sys, numpy as np
d = sys.argv[1]
def ids(lengths, name):
    np.save(f"{d}/{name}.npy", np.repeat(np.arange(len(lengths)), lengths).astype(np.int32))
ids([100, 1, 157, 126, 128, 488], "c1000")        # 1000
ids([33, 1, 219, 3, 444], "f700")                 # 700
ids([301, 77, 1, 500, 145], "c1024")              # 1024
rng = np.random.default_rng(5)
cuts = np.sort(rng.choice(np.arange(1, 4096), 11, replace=False))
ids(np.diff(np.concatenate([[0], cuts, [4096]])), "c4096")
ids([1000, 3, 1500, 1, 1592], "f4096")
ids([700, 129, 1, 1218], "c2048")
PYEOF
pk() { $D/new/fragmask pack --predicate "$1doc=$OUT/m/$2.npy" --seqlen-q $3 --seqlen-k $3 --transposed -o $OUT/m/$2.safetensors -q || echo "pack $2 failed"; }
pk causal, c1000 1000; pk "" f700 700; pk causal, c1024 1024; pk causal, c4096 4096; pk "" f4096 4096; pk causal, c2048 2048
timeout 200 $D/new/fragmask attention --backward --selftest > $OUT/self/new.txt 2>&1 &
run_san() {  # variant tool name args...
  local v=$1 tool=$2 name=$3; shift 3
  local log=$OUT/san/$v-$name-$tool.txt rc s
  timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 99 $D/$v/fragmask "$@" > "$log" 2>&1
  rc=$?
  s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' "$log" | tail -1)
  printf '%-4s %-22s %-9s rc=%-3s %s\n' "$v" "$name" "$tool" "$rc" "${s:-no summary}" > "$log.sum"
}
cases=(
  "docs-causal-1000-d128|attention --random 1,2,2,1000,1000,128 --backward --mask $OUT/m/c1000.safetensors"
  "docs-full-700-gqa-d64|attention --random 1,4,2,700,700,64 --backward --mask $OUT/m/f700.safetensors"
  "docs-causal-1024-d256|attention --random 1,2,1,1024,1024,256 --backward --mask $OUT/m/c1024.safetensors"
)
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    # shellcheck disable=SC2086
    run_san new $tool $name $args &
    while [ "$(jobs -rp | wc -l)" -ge 12 ]; do wait -n; done
  done
done
wait
echo "selftest + sanitizers t=$(el)"
echo "selftest new: $(tail -1 $OUT/self/new.txt)"; grep -E "^FAIL" $OUT/self/new.txt | head -10
grep -E "documents" $OUT/self/new.txt | cut -c1-190
cat $OUT/san/*.sum | sort
for f in $OUT/san/*racecheck.txt; do
  if grep -q "Race reported" "$f"; then echo "-- $(basename $f):"; grep -m 3 -A 3 "Race reported" "$f" | cut -c1-200; fi
done
for f in $OUT/san/*.txt; do
  if ! grep -q "SUMMARY" "$f"; then echo "-- $(basename $f): $(head -3 $f | cut -c1-200)"; fi
done

G=("c4096-d128|1,8,8,4096,4096,128|c4096" "f4096-gqa-d128|1,8,2,4096,4096,128|f4096" \
   "c4096-d64|1,4,4,4096,4096,64|c4096" "c2048-gqa-d256|1,4,2,2048,2048,256|c2048")
for g in "${G[@]}"; do
  IFS='|' read -r m shp mk <<< "$g"
  for v in base new; do
    timeout 60 $D/$v/fragmask attention --random $shp --backward --mask $OUT/m/$mk.safetensors --out $OUT/g-$m-$v.safetensors > $OUT/g-$m-$v.log 2>&1 \
      || echo "grad run $m $v failed: $(tail -2 $OUT/g-$m-$v.log)"
  done
done
python3 - "$OUT" c4096-d128 f4096-gqa-d128 c4096-d64 c2048-gqa-d256 <<'PYEOF'
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
for m in sys.argv[2:]:
    try:
        a, c = load(f"{sys.argv[1]}/g-{m}-base.safetensors"), load(f"{sys.argv[1]}/g-{m}-new.safetensors")
        r = {k: float(np.linalg.norm(a[k] - c[k]) / max(np.linalg.norm(a[k]), 1e-30)) for k in ('dq', 'dk', 'dv')}
        bad = sum(int((~np.isfinite(c[k])).sum()) for k in ('dq', 'dk', 'dv'))
        ok = bad == 0 and max(r.values()) < 1e-3
        print(f"{'OK  ' if ok else 'BAD '} new vs base {m}: rel L2 dq {r['dq']:.2e} dk {r['dk']:.2e} dv {r['dv']:.2e}; non-finite {bad}")
    except Exception as e:
        print(f"BAD  new vs base {m}: compare failed: {e}")
PYEOF
rm -f $OUT/g-*.safetensors
echo "gradients t=$(el)"

R1='^bwd\.(s16384|s8192)\.docs12$'
R2='^bwd\.(s16384\.(none|causal|window1024|random50|topk8)|s8192\.(none|random50)|s4096\.(none|random50)|d64\.s16384\.(none|causal)|d256\.s16384\.(none|causal)|gqa\.s16384\.causal|wu002\.blocks10)$'
mkdir -p $OUT/ab1 $OUT/ab2
timeout 70 python3 bench/suite/run.py --ab $D/base $D/new --interleave --rounds 2 --systems fragmask_cli --only "$R1" \
  --budget-s 60 --out $OUT/ab1 > $OUT/ab1/log.txt 2>&1; echo "ab1 base->new (docs) rc=$? t=$(el)"
left=$(( 225 - $(el) )); [ $left -lt 20 ] && left=20
timeout $left python3 bench/suite/run.py --ab $D/base $D/new --interleave --rounds 2 --systems fragmask_cli --only "$R2" \
  --budget-s $(( left - 10 )) --out $OUT/ab2 > $OUT/ab2/log.txt 2>&1; echo "ab2 base->new (other bwd rows) rc=$? t=$(el)"
rm -f $D/*/fragmask
echo "== A/B 1 (documents): A = base $(cat $D/base/COMMIT), B = new $(cat $D/new/COMMIT) (B/A below 1: B faster)"
grep -E "^\| (workload|bwd|---)" $OUT/ab1/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab1/log.txt | head -5
echo "== A/B 2 (other bwd rows)"
grep -E "^\| (workload|bwd|---)" $OUT/ab2/log.txt | cut -c1-170; grep -iE "^# (skipped|failed)|not in both|error|Traceback" $OUT/ab2/log.txt | head -5
echo "== correctness summary"
echo "selftest new: $(tail -1 $OUT/self/new.txt)"
echo "sanitizer runs: $(cat $OUT/san/*.sum | wc -l), not clean: $(cat $OUT/san/*.sum | grep -vcE 'rc=0 +(ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards)')"
echo "total t=$(el)"
cd $OUT && tar czf bdocs-run.tgz san self ab1 ab2 g-*.log 2>/dev/null; rm -rf san ab1 ab2 m
