#!/usr/bin/env bash
# Call 6 (H100): issue 24's table, its start (6f2ca7f) against 7eea077, forward and backward, 2 interleaved ABBA pairs.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/start && python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('.carry/c3/start.xz'), open('/tmp/start/fragmask','wb'))" && chmod +x /tmp/start/fragmask && echo 6f2ca7f > /tmp/start/COMMIT
timeout 560 python3 bench/suite/run.py --ab /tmp/start .carry/h19 --interleave --rounds 2 --systems fragmask_cli --budget-s 530 \
  --only '^(fwd|bwd)\.(s16384\.(none|causal|window1024|docs12|random50)|d64\.s16384\.(none|causal)|d256\.s16384\.(none|causal)|gqa\.s16384\.causal|gqa64\.s16384\.causal|wu002\.blocks(10|50))$' \
  --out $OUT/abstart 2>&1 | grep -v "^#" | grep "B/A\|skipped" | tee $OUT/abstart.txt | sort -t'/' -k3 | tail -30
