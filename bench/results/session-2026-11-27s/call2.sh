#!/usr/bin/env bash
# Call 2 (H100, right after call 1): FA4 part2; interleaved A/B f6747ca -> 7eea077 on the GQA backward rows
# (+ MHA causal control); then the GQA backward rows beside every peer at 7eea077.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
bash .carry/fa4/part2/install-on-device.sh .carry/fa4/part2 > $OUT/fa4part2.txt 2>&1; echo "fa4 part2 rc=$? $(tail -1 $OUT/fa4part2.txt)"
[ -d /tmp/fa4site/flash_attn ] && export FA4_SITE=/tmp/fa4site
mkdir -p /tmp/head && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.carry/c2/head.xz'), open('/tmp/head/fragmask','wb'))" && chmod +x /tmp/head/fragmask && echo f6747ca > /tmp/head/COMMIT
timeout 200 python3 bench/suite/run.py --ab /tmp/head .carry/h19 --interleave --rounds 2 --systems fragmask_cli --budget-s 180 \
  --only '^bwd\.(gqa\.s16384\.causal|gqa64\.s16384\.causal|gqa\.s8192\.causal|s16384\.causal)$' --out $OUT/abgqa 2>&1 | grep -v "^#" | grep "B/A" | tee $OUT/abgqa.txt
site=$(fm_install .carry/h19)
timeout 300 python3 bench/suite/run.py --only '^bwd\.gqa' --fa4 /tmp/fa4site --bin .carry/h19/fragmask --site $site --commit 7eea077 \
  --isolate --budget-s 280 --out $OUT/suite > $OUT/suite.txt 2>&1; echo "suite rc=$?"
python3 - <<'PY'
import json,glob
for f in glob.glob('/tmp/fragmask_out/suite/*.jsonl'):
    for l in open(f):
        r=json.loads(l)
        if r.get('kind')=='row': print(f"{r['workload']:26s} {r['system']:13s} {r['status']:6s} {r.get('ms') or 0:8.3f} vs={r.get('vs_fragmask')}")
PY
