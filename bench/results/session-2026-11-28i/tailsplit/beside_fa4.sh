#!/usr/bin/env bash
# After three fa4_install.sh calls (GPU machine kept warm; the change's binary as /tmp/B/fragmask
# and its wheel installed from .carry/t28b): the head-dim-64 rows and S=16384 no mask beside
# FlashAttention-4 (run.py --repeat 3, order alternating), then a one-binary A/B of the split
# tail (--tail-split off against the default) over 4 interleaved pairs after 500 ms of warm-up.
source bench/suite/device_env.sh
site=${FM_SITE:-$(fm_install .carry/t28b)}
python3 bench/suite/run.py --only '^fwd[.](d64[.]s16384[.](none|causal)|s16384[.]none)$' \
    --systems fragmask,fragmask_cli,fa4 --fa4 /tmp/fa4site --site "$site" --bin /tmp/B/fragmask \
    --repeat 3 --out "$OUT/suite" 2>&1 | tail -12
mkdir -p /tmp/C && printf '#!/bin/sh\nexec /tmp/B/fragmask "$@" --tail-split off\n' > /tmp/C/fragmask \
    && chmod +x /tmp/C/fragmask && echo "$(cat /tmp/B/COMMIT)-tail-off" > /tmp/C/COMMIT
python3 bench/suite/run.py --ab /tmp/C /tmp/B --interleave --rounds 4 --warmup-ms 500 --systems fragmask_cli \
    --only '^fwd[.](s16384[.](none|random50)|d64[.]s16384[.]none|d256[.]s16384[.]none)$' --out "$OUT/ab" 2>&1 | grep -E '^\| fwd'
