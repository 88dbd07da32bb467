#!/usr/bin/env bash
# Call 2: lse read after the stage release for the next step (1) or at the step top before S^T (2);
# ptxas --register-usage-level=0 (P). One binary, variants by environment (experiments only).
source bench/suite/device_env.sh
fm_unxz .carry/x30/fm.xz A x30b-base
mk() { mkdir -p /tmp/$1 && printf '#!/bin/sh\n%s exec /tmp/A/fragmask "$@"\n' "$2" > /tmp/$1/fragmask && chmod +x /tmp/$1/fragmask && echo "x30b-$1" > /tmp/$1/COMMIT; }
mk B1 "FM_EXP_LSE_AHEAD=1"; mk B2 "FM_EXP_LSE_AHEAD=2"; mk P "FM_EXP_PTXAS=--register-usage-level=0"
ROWS='^bwd[.](s16384[.](none|causal|window1024|docs12)|s8192[.]none)$'
for b in B1 B2; do
  python3 bench/suite/run.py --ab /tmp/A /tmp/$b --interleave --rounds 2 --systems fragmask_cli --only "$ROWS" --out $OUT/ab > $OUT/ab-$b.log 2>&1
done
python3 bench/suite/run.py --ab /tmp/A /tmp/P --interleave --rounds 2 --systems fragmask_cli \
  --only '^(fwd[.](s16384[.](none|causal)|d64[.]s16384[.]causal)|bwd[.]s16384[.](none|causal))$' --out $OUT/ab > $OUT/ab-P.log 2>&1
for b in B1 B2 P; do echo "== $b"; grep "B/A" $OUT/ab-$b.log; done
