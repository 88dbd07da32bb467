#!/usr/bin/env bash
# Call 8: head dim 64's causal forward (the one forward row below FA4's speed on this H200, 0.984): the
# launch-order and loop knobs of one binary (HEAD, k35a) against its defaults, 3 ABBA pairs.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k35a/fm.xz k35a "$(cat .carry/k35a/COMMIT)"
timeout 200 python3 -m bench.suite.flag_pairs /tmp/k35a/fragmask '^fwd[.]d64[.]s16384[.]causal$' 3 \
  "--head-section 1" "--head-section 8" "--persistent on" "--stages 2" 2>&1 | tail -8
