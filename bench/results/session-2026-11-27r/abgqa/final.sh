#!/usr/bin/env bash
# Final checks of the group slices build: A/B against f6747ca on the GQA rows (+ MHA control),
# the forward table and head dim 256 backward against issue 24's start, the backward selftest.
set -uo pipefail
source bench/suite/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 bench/suite/run.py --ab .carry/head .carry/final --interleave --rounds 2 --systems fragmask_cli --budget-s 130 \
  --only '^bwd\.(gqa\.s16384\.causal|gqa64\.s16384\.causal|gqa\.s8192\.causal|s16384\.causal)$' --out $OUT/abgqa 2>&1 | grep -v "^#" | grep "B/A"
timeout 250 python3 bench/suite/run.py --ab .carry/start .carry/final --interleave --rounds 2 --systems fragmask_cli --budget-s 230 \
  --only '^(fwd\.(s16384\.(none|causal|window1024|docs12|random50)|d64\.s16384\.(none|causal)|d256\.s16384\.(none|causal)|gqa\.s16384\.causal|gqa64\.s16384\.causal|wu002\.blocks(10|50))|bwd\.d256\.s16384\.(none|causal))$' --out $OUT/abstart 2>&1 | grep -v "^#" | grep "B/A\|skipped"
timeout 60 .carry/final/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1; echo "selftest rc=$? $(grep -c '^PASS' $OUT/selftest.txt) pass, $(tail -1 $OUT/selftest.txt)"
