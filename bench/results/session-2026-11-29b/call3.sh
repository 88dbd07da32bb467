#!/usr/bin/env bash
# Call 3: FA4 part 2 of 3; HEAD (k34a = ddc919c) against issue 24's start (6f2ca7f) over the
# issue's whole table, CLI kernel times, interleaved ABBA pairs, the counted warm-up (6f2ca7f has no --warmup-ms).
set -uo pipefail
source bench/suite/device_env.sh
bash bench/suite/fa4_install.sh .carry/fa4x/p2
[ -x /tmp/k34a/fragmask ] || fm_unxz .carry/k34a/fm.xz k34a "$(cat .carry/k34a/COMMIT)"
[ -x /tmp/start/fragmask ] || fm_unxz .carry/start/fm.xz start 6f2ca7f
only="^(fwd|bwd)[.](s16384[.](none|causal|window1024|docs12|random50)|d64[.]s16384[.](none|causal)|d256[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal|wu002[.]blocks(10|50))$"
timeout 500 python3 bench/suite/run.py --ab /tmp/start /tmp/k34a --interleave --rounds 2 \
  --systems fragmask_cli --only "$only" --out $OUT/ab --budget-s 470 2>&1 | tail -40
