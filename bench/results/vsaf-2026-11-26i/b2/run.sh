#!/usr/bin/env bash
# vsaf batch 2: persistent CTAs on the shared-K/V 64-token tile (default in the new build).
# Speed: interleaved ABBA via `fragmask bench attention` (base 788084a vs new, new --persistent off);
# correctness: selftest of the shared tile, sanitizers on persistent shared calls.
set -uo pipefail
T0=$(date +%s); B=/tmp/vsaf; mkdir -p $B; R=$B/res; mkdir -p $R
xz -dc .carry/base/fragmask.xz > $B/base && chmod +x $B/base
xz -dc .carry/vsaf/fragmask.xz > $B/new && chmod +x $B/new
python3 - <<'PY'
import numpy as np, torch
g = torch.Generator().manual_seed(1)
def mk(name, heads, n, frac, variable):
    qb = kb = (n + 63) // 64; k = max(1, round(frac*kb))
    s = torch.rand(heads, qb, kb, generator=g)
    idx = s.topk(k, dim=-1).indices.sort(dim=-1).values.to(torch.int32)
    np.save(f"/tmp/vsaf/{name}_i.npy", idx.numpy()); np.save(f"/tmp/vsaf/{name}_n.npy", np.full((heads, qb), k, np.int32))
    if variable: np.save(f"/tmp/vsaf/{name}_s.npy", torch.randint(48, 65, (kb,), generator=g, dtype=torch.int32).numpy())
mk("m10", 12, 23296, 0.1, False); mk("m50", 12, 23296, 0.5, False); mk("m10v", 12, 23296, 0.1, True)
mk("small", 2, 1280, 0.2, False); mk("smallv", 3, 1000, 0.3, True)
PY
pk() { n=$1; L=$2; ex=""; [ -f $B/${n}_s.npy ] && ex="--block-sizes $B/${n}_s.npy"; $B/new pack --blocks $B/${n}_i.npy --blocks-num $B/${n}_n.npy $ex --seqlen-q $L --seqlen-k $L --block 64x64 --warpgroups 1 -o $B/$n.safetensors -q || echo "pack $n failed"; }
pk m10 23296; pk m50 23296; pk m10v 23296; pk small 1280; pk smallv 1000
RND="--random 1,12,12,23296,23296,128"
b() { local bin=$1 m=$2; shift 2; timeout 20 $B/$bin bench attention $RND --mask $B/$m.safetensors --json --warmup 20 --iters 100 "$@" 2>/dev/null | python3 -c "import sys,json; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); k=d.get('kernel',''); print(round(d['ms_median'],4), 'P' if 'persistent: true' in k else '-', 's'+k.split('stages: ')[1][0] if 'stages: ' in k else '')" 2>/dev/null || echo "fail"; }
echo "== speed (ms median of 100; ABBA base/new, plus new --persistent off)" > $R/speed.txt
for m in m10 m50 m10v; do for pair in 1 2; do
  for v in base new off new base; do
    case $v in base) r=$(b base $m);; new) r=$(b new $m);; off) r=$(b new $m --persistent off);; esac
    echo "$m $pair $v $r" >> $R/speed.txt
  done; done; done
echo "speed done at $(( $(date +%s) - T0 )) s" >> $R/speed.txt
timeout 60 $B/new attention --selftest --block 64x64/2x2 > $R/selftest.txt 2>&1; echo "selftest rc=$?" >> $R/selftest.txt
echo "selftest done at $(( $(date +%s) - T0 )) s" >> $R/speed.txt
: > $R/san.txt
for c in "shared-persist-gqa-random|attention --random 1,4,2,900,700,128 --block 64x64/2x2 --synthetic-mask random:0.3 --persistent on --persistent-ctas 3" \
         "vsa-whole-default|attention --random 1,2,2,1280,1280,128 --mask $B/small.safetensors --persistent-ctas 3" \
         "vsa-variable-default|attention --random 1,3,3,1000,1000,128 --mask $B/smallv.safetensors"; do
  name=${c%%|*}; args=${c#*|}
  for tool in memcheck racecheck synccheck; do
    [ $(( $(date +%s) - T0 )) -gt 215 ] && { echo "$name $tool skipped (time)" >> $R/san.txt; continue; }
    timeout 25 compute-sanitizer --tool $tool --error-exitcode 99 $B/new $args > $R/san-$name-$tool.log 2>&1; rc=$?
    s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$name-$tool.log | tail -1)
    echo "$name $tool rc=$rc ${s:-no summary}" >> $R/san.txt
  done
done
cd $R && tar czf $OUT/vsaf2.tgz . 2>/dev/null
python3 - <<'PY'
import collections, statistics
d = collections.defaultdict(list)
for l in open("/tmp/vsaf/res/speed.txt"):
    p = l.split()
    if len(p) >= 4 and p[3] != "fail" and p[0].startswith("m"):
        try: d[(p[0], p[2])].append(float(p[3]))
        except ValueError: pass
for m in ("m10", "m50", "m10v"):
    base = statistics.median(d[(m, "base")]) if d[(m, "base")] else float("nan")
    out = [f"{m}: base {base:.4f}"]
    for v in ("new", "off"):
        if d[(m, v)]:
            x = statistics.median(d[(m, v)]); out.append(f"{v} {x:.4f} ({x/base:.3f})")
    print("  ".join(out))
PY
grep -E 'selftest:|FAIL|rc=' $R/selftest.txt | tail -5
cat $R/san.txt; grep 'done at' $R/speed.txt
