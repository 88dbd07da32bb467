#!/usr/bin/env bash
# Call 14: is the suite's Python row (bshd) faster than its CLI row (bhsd) because of the layout?
# Python op in both layouts; CLI with O in bhsd against bshd (--out-layout), same binary.
source bench/suite/device_env.sh
site=$(fm_install .carry/p29)
python3 bench/results/session-2026-11-28h/layout-probe/layout_probe.py "$site" 2>&1 | tail -4
[ -x /tmp/A/fragmask ] || fm_unxz .carry/x30/fm.xz A x30c
mkdir -p /tmp/O && printf '#!/bin/sh\nexec /tmp/A/fragmask "$@" --out-layout bshd\n' > /tmp/O/fragmask && chmod +x /tmp/O/fragmask && echo x30c-out-bshd > /tmp/O/COMMIT
python3 bench/suite/run.py --ab /tmp/A /tmp/O --interleave --rounds 2 --systems fragmask_cli \
  --only '^fwd[.](s16384[.](none|causal)|d64[.]s16384[.]none)$' --out $OUT/ab > $OUT/ab-O.log 2>&1
grep "B/A\|error\|Error" $OUT/ab-O.log | head
