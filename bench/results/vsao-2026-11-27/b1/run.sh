#!/usr/bin/env bash
# vsao: step order of the shared-K/V 64-token tile (runs of r steps per kind) and/or the
# overlapped loop keeping the pending PV across skipped steps. Variants (one binary each):
#   b0 = this branch, r=1, keep off (control: same kernel SASS and order as base)
#   r2/r3 = runs of 2/3 steps per kind (host only); k1 = keep pending, r=1; k2 = keep pending, r=2
# Speed: fragmask bench attention, wu002 masks (N=23296 H=12 D=128, 64-token lists 10%/50%),
# per round the sequence base b0 r2 r3 k1 k2 k2 k1 r3 r2 b0 base (ABBA-symmetric).
set -uo pipefail
T0=$(date +%s); B=/tmp/vsao; mkdir -p $B; R=$B/res; rm -rf $R; mkdir -p $R
el() { echo $(( $(date +%s) - T0 )); }
xz -dc .carry/base/fragmask.xz > $B/base && chmod +x $B/base
V="b0 r2 r3 k1 k2"
for v in $V; do xz -dc .carry/vsao/$v.xz > $B/$v && chmod +x $B/$v; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader > $R/gpu.txt
python3 - <<'PY'
import numpy as np, torch
g = torch.Generator().manual_seed(1)
def mk(name, heads, n, frac, variable):
    qb = kb = (n + 63) // 64; k = max(1, round(frac*kb))
    s = torch.rand(heads, qb, kb, generator=g)
    idx = s.topk(k, dim=-1).indices.sort(dim=-1).values.to(torch.int32)
    np.save(f"/tmp/vsao/{name}_i.npy", idx.numpy()); np.save(f"/tmp/vsao/{name}_n.npy", np.full((heads, qb), k, np.int32))
    if variable: np.save(f"/tmp/vsao/{name}_s.npy", torch.randint(48, 65, (kb,), generator=g, dtype=torch.int32).numpy())
mk("m10", 12, 23296, 0.1, False); mk("m50", 12, 23296, 0.5, False)
mk("small", 2, 1280, 0.2, False); mk("mid", 2, 2560, 0.3, False); mk("smallv", 3, 1000, 0.3, True)
PY
pk() { n=$1; L=$2; ex=""; [ -f $B/${n}_s.npy ] && ex="--block-sizes $B/${n}_s.npy"; $B/base pack --blocks $B/${n}_i.npy --blocks-num $B/${n}_n.npy $ex --seqlen-q $L --seqlen-k $L --block 64x64 --warpgroups 1 -o $B/$n.safetensors -q || echo "pack $n failed"; }
pk m10 23296; pk m50 23296; pk small 1280; pk mid 2560; pk smallv 1000
echo "prep done at $(el) s" > $R/log.txt
# correctness of the kernel variants first (selftest of the shared tile)
for v in k2 k1 r2; do
  timeout 40 $B/$v attention --selftest --block 64x64/2x2 > $R/selftest-$v.txt 2>&1; echo "selftest rc=$?" >> $R/selftest-$v.txt
done
echo "selftests done at $(el) s" >> $R/log.txt
RND="--random 1,12,12,23296,23296,128"
b() { local bin=$1 m=$2; timeout 20 $B/$bin bench attention $RND --mask $B/$m.safetensors --json --warmup 20 --iters 100 2>/dev/null | python3 -c "import sys,json; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); k=d.get('kernel',''); print(round(d['ms_median'],4), 'shared' if 'shared_kv: true' in k else 'OTHER')" 2>/dev/null || echo "fail"; }
: > $R/speed.txt
for round in 1 2; do for m in m10 m50; do
  for v in base b0 r2 r3 k1 k2 k2 k1 r3 r2 b0 base; do echo "$m $round $v $(b $v $m)" >> $R/speed.txt; done
done; done
echo "speed done at $(el) s" >> $R/log.txt
: > $R/san.txt
for c in "k2|mid|attention --random 1,2,2,2560,2560,128 --mask $B/mid.safetensors" \
         "k2|smallv|attention --random 1,3,3,1000,1000,128 --mask $B/smallv.safetensors" \
         "k1|small|attention --random 1,2,2,1280,1280,128 --mask $B/small.safetensors"; do
  IFS='|' read -r v name args <<< "$c"
  for tool in memcheck racecheck synccheck; do
    [ $(el) -gt 205 ] && { echo "$v $name $tool skipped (time)" >> $R/san.txt; continue; }
    timeout 25 compute-sanitizer --tool $tool --error-exitcode 99 $B/$v $args > $R/san-$v-$name-$tool.log 2>&1; rc=$?
    s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-$v-$name-$tool.log | tail -1)
    echo "$v $name $tool rc=$rc ${s:-no summary}" >> $R/san.txt
  done
done
echo "sanitizers done at $(el) s" >> $R/log.txt
python3 - > $R/table.txt <<'PY'
import collections, statistics as st
d = collections.defaultdict(list)
for l in open("/tmp/vsao/res/speed.txt"):
    p = l.split()
    if len(p) >= 4 and p[3] != "fail":
        try: d[(p[0], int(p[1]), p[2])].append(float(p[3]))
        except ValueError: pass
print("row   variant  base_ms  var_ms  ratio/base (per round)   ratio/b0 (per round)")
for m in ("m10", "m50"):
    for v in ("b0", "r2", "r3", "k1", "k2"):
        rb, r0, bs, vs = [], [], [], []
        for r in (1, 2):
            base, b0, x = d[(m, r, "base")], d[(m, r, "b0")], d[(m, r, v)]
            if base and x:
                bs.append(st.mean(base)); vs.append(st.mean(x)); rb.append(st.mean(x) / st.mean(base))
            if b0 and x: r0.append(st.mean(x) / st.mean(b0))
        if rb:
            print(f"{m:5} {v:7} {st.mean(bs):.4f}  {st.mean(vs):.4f}  {st.mean(rb):.3f} ({' '.join(f'{x:.3f}' for x in rb)})   {st.mean(r0):.3f} ({' '.join(f'{x:.3f}' for x in r0)})")
PY
cd $R && tar czf $OUT/vsao.tgz . 2>/dev/null
for v in k2 k1 r2; do echo "selftest $v: $(grep -c '^PASS' $R/selftest-$v.txt) PASS, $(grep -E 'selftest:|rc=' $R/selftest-$v.txt | tr '\n' ' ')"; done
cat $R/san.txt; cat $R/log.txt; cat $R/gpu.txt
cat $R/table.txt
