#!/usr/bin/env bash
# Call 5 (HEAD ddc919c): the shared-K/V choice on write-up 002 masks whose paired query blocks
# share 50/80/100% of their lists, and on the suite's 48-64-token rows.
set -uo pipefail
source bench/suite/device_env.sh
[ -x /tmp/k34a/fragmask ] || fm_unxz .carry/k34a/fm.xz k34a "$(cat .carry/k34a/COMMIT)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 330 python3 bench/results/session-2026-11-29b/sharedkv_pairs.py /tmp/k34a/fragmask 3 .carry/k34m/*.xz 2>&1 | tee $OUT/sharedkv-overlap.txt
timeout 150 python3 -m bench.suite.flag_pairs /tmp/k34a/fragmask '^fwd[.]wu002[.]blocks(10|50)v$' 3 "--shared-kv off" 2>&1 | tee $OUT/sharedkv-variable.txt
