#!/usr/bin/env bash
# The backward selftest's new 'bshd grads' cases (gradients through [B, S, H, D] strides,
# gathered back and compared with the f64 reference) on the build .carry/t29, then the whole
# backward sweep.
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/t29/fragmask ] || fm_unxz .carry/t29/fm.xz t29 "$(cat .carry/t29/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 /tmp/t29/fragmask attention --selftest --backward --cases "bshd grads" > $OUT/bwd_bshd.txt 2>&1
echo "bshd grads rc=$? ${SECONDS}s"; cat $OUT/bwd_bshd.txt
timeout 400 /tmp/t29/fragmask attention --selftest --backward > $OUT/bwd_all.txt 2>&1
echo "all rc=$? ${SECONDS}s $(tail -1 $OUT/bwd_all.txt) PASS=$(grep -c '^PASS' $OUT/bwd_all.txt)"; grep "^FAIL" $OUT/bwd_all.txt | head
