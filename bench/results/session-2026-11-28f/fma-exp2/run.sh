#!/usr/bin/env bash
# exp2 on the FMA pipe (--fma-exp2 N), one binary (.carry/x25), on the GPU machine:
#   bash run.sh 1   forward selftest at the most aggressive share, then the D=64 and D=128
#                   no-mask / causal rows with each share against the default (ABBA pairs)
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/x25/fragmask ] || fm_unxz .carry/x25/fm.xz x25 "$(cat .carry/x25/COMMIT)"
B=/tmp/x25/fragmask
case "${1:?call 1}" in
1)
    timeout 200 $B attention --selftest --fma-exp2 2 > $OUT/selftest-fma2.txt 2>&1
    echo "selftest --fma-exp2 2 rc=$? ${SECONDS}s"; tail -1 $OUT/selftest-fma2.txt
    grep -c "^PASS" $OUT/selftest-fma2.txt; grep "^FAIL" $OUT/selftest-fma2.txt | head -5
    timeout 220 python3 -m bench.suite.flag_pairs $B '^fwd[.]d64[.]s16384' 2 \
        "--fma-exp2 8" "--fma-exp2 4" "--fma-exp2 3" "--fma-exp2 2" | tee $OUT/pairs-d64.txt
    timeout 140 python3 -m bench.suite.flag_pairs $B '^fwd[.]s16384[.](none|causal)$' 2 \
        "--fma-exp2 8" "--fma-exp2 4" | tee $OUT/pairs-d128.txt
    ;;
esac
