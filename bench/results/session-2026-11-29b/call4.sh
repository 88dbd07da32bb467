#!/usr/bin/env bash
# Call 4: FA4 part 3 of 3; write-up 002's forward rows with and without shared K/V (HEAD);
# issue 24's rows beside FA4 and Flex, shard 1 of 2.
set -uo pipefail
source bench/suite/device_env.sh
bash bench/suite/fa4_install.sh .carry/fa4x/p3
[ -x /tmp/k34a/fragmask ] || fm_unxz .carry/k34a/fm.xz k34a "$(cat .carry/k34a/COMMIT)"
timeout 120 python3 -m bench.suite.flag_pairs /tmp/k34a/fragmask '^fwd[.]wu002[.]blocks(10|50)$' 3 "--shared-kv off" 2>&1 | tee $OUT/sharedkv-pairs.txt
BUDGET_S=330 bash bench/suite/issue24_rows.sh k34a 1/2
