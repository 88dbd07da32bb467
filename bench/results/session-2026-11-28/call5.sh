#!/usr/bin/env bash
# Call 5 (H100): the one row the whole-table A/B put above 1.02 (fwd.gqa.s16384.causal, 1.045; its kernel's SASS is 7eea077's), 4 more interleaved pairs, with its backward twin.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
un() { mkdir -p /tmp/$2 && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$1'), open('/tmp/$2/fragmask','wb'))" && chmod +x /tmp/$2/fragmask && echo $3 > /tmp/$2/COMMIT; }
un .carry/c1/h19.xz h19 7eea077
un .carry/n1/fm.xz n2 feef8e5
timeout 400 python3 bench/suite/run.py --ab /tmp/h19 /tmp/n2 --interleave --rounds 4 --systems fragmask_cli --budget-s 380 \
  --only '^(fwd|bwd)\.gqa\.s16384\.causal$' --out $OUT/abgqa 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/abgqa.txt
