#!/usr/bin/env bash
# Call 3 (H100): issue 24's whole table, 7eea077 (kernels of e910da0) against feef8e5 (paired key blocks), 2 interleaved ABBA pairs.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/c1/h19.xz h19 7eea077
un .carry/n1/fm.xz n2 feef8e5
timeout 565 python3 bench/suite/run.py --ab /tmp/h19 /tmp/n2 --interleave --rounds 2 --systems fragmask_cli --budget-s 540 \
  --only '^(fwd|bwd)\.(s16384\.(none|causal|window1024|docs12|random50)|d64\.s16384\.(none|causal)|d256\.s16384\.(none|causal)|gqa\.s16384\.causal|gqa64\.s16384\.causal|wu002\.blocks(10|50))$' \
  --out $OUT/abtable 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/abtable.txt | sort -t'/' -k3 | tail -30
