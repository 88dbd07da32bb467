#!/usr/bin/env bash
# Call 5: 1910ff1 (k32g: the probes on the library's wgmma/mma.sync helpers, the overlapped loops' shared
# softmax component) against d5a71b6 (k32c): forward outputs byte for byte, `fragmask verify`, the shared-K/V
# tile's selftest and the sanitizers on its cases.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k32c/fm.xz C "$(cat .carry/k32c/COMMIT)"
fm_unxz .carry/k32g/fm.xz G "$(cat .carry/k32g/COMMIT)"
source bench/suite/same_outputs.sh
fm_same_outputs /tmp/C/fragmask /tmp/G/fragmask 2>&1 | tail -3
timeout 150 /tmp/G/fragmask verify > $OUT/verify.txt 2>&1; echo "verify rc=$?"; tail -6 $OUT/verify.txt
timeout 150 /tmp/G/fragmask attention --selftest --block 64x64/2x2 > $OUT/selftest-shared.txt 2>&1; echo "selftest rc=$?"; tail -2 $OUT/selftest-shared.txt
CASES='^fwd-64tok-shared-kv(-sparse)?$' timeout 150 bash bench/suite/sanitize.sh /tmp/G 2>&1 | tail -6
