#!/usr/bin/env bash
# HEAD's kernels and CLI (c166fc8, .carry/q29) with the 9dcc051 wheel (.carry/p29; the Python
# package is unchanged since): the GPU test comparing the op with the CLI in both --out-layout
# values, and the sanitizers on the new sparse shared-K/V case of cli_cases.sh.
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/q29/fragmask ] || fm_unxz .carry/q29/fm.xz q29 "$(cat .carry/q29/COMMIT)"
P=$(fm_install .carry/p29)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(cd crates/python/tests && FRAGMASK_BIN=/tmp/q29/fragmask PYTHONPATH=$P timeout 120 python3 -m unittest -v \
   -k test_outputs_equal_the_clis_on_the_same_files test_gpu 2>&1 | tail -5)
CASES='^fwd-64tok-shared-kv' timeout 100 bash bench/suite/sanitize.sh /tmp/q29 > $OUT/sanitize_shared.txt 2>&1
echo "sanitize rc=$? ${SECONDS}s"; tail -6 $OUT/sanitize_shared.txt
