#!/usr/bin/env bash
# Everything the per-stage release needs before it can land, in two device calls (the next
# session): `bash validate.sh 1` (backward selftest + sanitizers on the backward cases) and
# `bash validate.sh 2` (interleaved A/B of every backward row against c9e626f, 2 ABBA pairs).
# Carry .carry/a28 (c9e626f) and .carry/r23 (58f2ae5 + release-per-stage.patch; rebuild it if
# main has moved: git apply the patch, cargo build --release, xz the binary into .carry/r23).
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/r23/fragmask ] || fm_unxz .carry/r23/fm.xz r23 release
case "${1:?call 1 or 2}" in
1)
    timeout 240 /tmp/r23/fragmask attention --selftest --backward > $OUT/selftest.txt 2>&1
    echo "selftest rc=$? ${SECONDS}s"; grep -ci "fail" $OUT/selftest.txt; tail -3 $OUT/selftest.txt
    CASES='^bwd-' timeout 300 bash bench/suite/sanitize.sh /tmp/r23 2>&1 | tail -36
    ;;
2)
    [ -x /tmp/a28/fragmask ] || fm_unxz .carry/a28/fm.xz a28 c9e626f
    timeout 540 python3 bench/suite/run.py --ab /tmp/a28 /tmp/r23 --interleave --rounds 2 \
        --systems fragmask_cli --only '^bwd[.]' --out $OUT/ab 2>&1 | tail -30
    ;;
esac
