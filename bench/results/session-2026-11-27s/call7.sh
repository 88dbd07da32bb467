#!/usr/bin/env bash
# Call 7b (H100, right after part1): FA4 part2; the GQA backward rows with fragmask and FA4, 3 runs each.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
bash .carry/fa4/part2/install-on-device.sh .carry/fa4/part2 > $OUT/fa4part2.txt 2>&1; echo "fa4 part2 rc=$? $(tail -1 $OUT/fa4part2.txt)"
site=$(fm_install .carry/h19)
timeout 500 python3 bench/suite/run.py --only '^bwd\.gqa' --systems fragmask,fragmask_cli,fa4 --fa4 /tmp/fa4site --bin .carry/h19/fragmask --site $site --commit 7eea077 \
  --repeat 3 --budget-s 480 --out $OUT/suite > $OUT/suite.txt 2>&1; echo "suite rc=$?"
python3 - <<'PY'
import glob,json,os
for f in glob.glob(os.environ['OUT']+'/suite/*.jsonl'):
    rows=[json.loads(l) for l in open(f)]
    for r in rows:
        if r.get('kind')=='row': print(f"{r['workload']:26s} {r['system']:13s} {r['status']:5s} {r.get('ms') or 0:8.3f} vs={r.get('vs_fragmask')} runs={[round(x,3) for x in r.get('repeats_ms') or []]}")
PY
