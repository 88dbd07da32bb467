#!/usr/bin/env bash
# Call 5 (H100): GQA backward knob sweep at 7eea077 (group slices x head sections), two rounds;
# then the VSA backward rows at 7eea077 beside Flex.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
B=.carry/h19/fragmask
ms() { python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(round(d['ms_median'],4), d['kernel'])" 2>&1 | tail -1; }
mkdir -p $OUT/sweep
{
for round in 1 2; do
  for cfg in 1,64,8 1,32,8; do
    for g in 2 4 8; do
      [ "$cfg" = "1,32,8" ] && [ $g = 8 ] && continue
      for hs in default 1 2 8; do
        extra=""; [ $hs != default ] && extra="--head-section $hs"
        echo "round=$round cfg=$cfg slices=$g hs=$hs ms=$($B bench backward --random $cfg,16384,16384,128 --causal --group-slices $g $extra --iters 10 --warmup 3 --json 2>&1 | ms)"
      done
    done
  done
done
} 2>&1 | tee $OUT/sweep/gqa.txt | tail -3
site=$(fm_install .carry/h19)
timeout 240 python3 bench/suite/run.py --only '^bwd\.wu002\.blocks(10|50)$' --systems fragmask,fragmask_cli,flex --bin $B --site $site --commit 7eea077 \
  --repeat 3 --budget-s 220 --out $OUT/suite > $OUT/suite.txt 2>&1; echo "suite rc=$?"
python3 - <<'PY'
import collections,re,os
rows=collections.defaultdict(list)
for l in open(os.environ['OUT']+'/sweep/gqa.txt'):
    m=re.search(r'cfg=(\S+) slices=(\d+) hs=(\S+) ms=([\d.]+)',l)
    if m: rows[m.groups()[:3]].append(float(m.group(4)))
for k,v in sorted(rows.items()): print(*k, ' '.join(f'{x:.3f}' for x in v), f'min {min(v):.3f}')
import glob,json
for f in glob.glob(os.environ['OUT']+'/suite/*.jsonl'):
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='row': print(r['workload'], r['system'], r['status'], r.get('ms'), r.get('repeats_ms'))
PY
