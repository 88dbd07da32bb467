#!/usr/bin/env bash
# vsao batch 2: precise A/B of the runs-of-2 step order (r2, host only) against the base binary
# and the branch's own control b0 (same order and kernel SASS as base), wu002 masks
# N=23296 H=12 D=128 (10%, 50%, 10% with 48-64-token blocks); longer warmup (100) and 400 iters;
# rounds alternate the sequence (base b0 r2 r2 b0 base / r2 b0 base base b0 r2).
# Then compute-sanitizer memcheck/racecheck/synccheck on r2 (its order, default kernel) and its selftest.
set -uo pipefail
T0=$(date +%s); B=/tmp/vsao; mkdir -p $B; R=$B/res2; rm -rf $R; mkdir -p $R
el() { echo $(( $(date +%s) - T0 )); }
xz -dc .carry/base/fragmask.xz > $B/base && chmod +x $B/base
for v in b0 r2; do xz -dc .carry/vsao/$v.xz > $B/$v && chmod +x $B/$v; done
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
mk("m10", 12, 23296, 0.1, False); mk("m50", 12, 23296, 0.5, False); mk("m10v", 12, 23296, 0.1, True)
mk("mid", 2, 2560, 0.3, False)
PY
pk() { n=$1; L=$2; ex=""; [ -f $B/${n}_s.npy ] && ex="--block-sizes $B/${n}_s.npy"; $B/base pack --blocks $B/${n}_i.npy --blocks-num $B/${n}_n.npy $ex --seqlen-q $L --seqlen-k $L --block 64x64 --warpgroups 1 -o $B/$n.safetensors -q || echo "pack $n failed"; }
pk m10 23296; pk m50 23296; pk m10v 23296; pk mid 2560
echo "prep done at $(el) s" > $R/log.txt
RND="--random 1,12,12,23296,23296,128"
b() { local bin=$1 m=$2 it=$3; timeout 25 $B/$bin bench attention $RND --mask $B/$m.safetensors --json --warmup 100 --iters $it 2>/dev/null | python3 -c "import sys,json; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); k=d.get('kernel',''); print(round(d['ms_median'],4), 'shared' if 'shared_kv: true' in k else 'OTHER')" 2>/dev/null || echo "fail"; }
: > $R/speed.txt
S1="base b0 r2 r2 b0 base"; S2="r2 b0 base base b0 r2"
for plan in "m10 1 400" "m50 1 200" "m10 2 400" "m50 2 200" "m10v 1 400" "m10 3 400" "m50 3 200" "m10v 2 400" "m10 4 400"; do
  read -r m r it <<< "$plan"
  [ $(el) -gt 190 ] && { echo "$m round $r skipped (time)" >> $R/log.txt; continue; }
  seq=$S1; [ $((r % 2)) = 0 ] && seq=$S2
  for v in $seq; do echo "$m $r $v $(b $v $m $it)" >> $R/speed.txt; done
done
echo "speed done at $(el) s" >> $R/log.txt
: > $R/san.txt
for tool in memcheck racecheck synccheck; do
  [ $(el) -gt 212 ] && { echo "r2 mid $tool skipped (time)" >> $R/san.txt; continue; }
  timeout 20 compute-sanitizer --tool $tool --error-exitcode 99 $B/r2 attention --random 1,2,2,2560,2560,128 --mask $B/mid.safetensors > $R/san-r2-mid-$tool.log 2>&1; rc=$?
  s=$(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/san-r2-mid-$tool.log | tail -1)
  echo "r2 mid $tool rc=$rc ${s:-no summary}" >> $R/san.txt
done
echo "sanitizers done at $(el) s" >> $R/log.txt
python3 - > $R/table.txt <<'PY'
import collections, statistics as st
d = collections.defaultdict(list)
for l in open("/tmp/vsao/res2/speed.txt"):
    p = l.split()
    if len(p) >= 4 and p[3] != "fail":
        try: d[(p[0], int(p[1]), p[2])].append(float(p[3]))
        except ValueError: pass
print("row   variant base_ms var_ms  ratio/base (per round)         ratio/b0 (per round)")
for m in ("m10", "m50", "m10v"):
    for v in ("b0", "r2"):
        rb, r0, bs, vs = [], [], [], []
        for r in (1, 2, 3, 4):
            base, b0, x = d[(m, r, "base")], d[(m, r, "b0")], d[(m, r, v)]
            if base and x:
                bs.append(st.mean(base)); vs.append(st.mean(x)); rb.append(st.mean(x) / st.mean(base))
            if b0 and x: r0.append(st.mean(x) / st.mean(b0))
        if rb:
            print(f"{m:5} {v:6} {st.mean(bs):.4f} {st.mean(vs):.4f}  {st.mean(rb):.3f} ({' '.join(f'{x:.3f}' for x in rb)})   {st.mean(r0):.3f} ({' '.join(f'{x:.3f}' for x in r0)})")
PY
cd $R && tar czf $OUT/vsao2.tgz . 2>/dev/null
cat $R/san.txt; cat $R/log.txt; cat $R/gpu.txt
cat $R/table.txt
