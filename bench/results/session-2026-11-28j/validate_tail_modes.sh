#!/usr/bin/env bash
# An asked-for split tail on a documents mask (the documents grid's default yields to the tile
# lists) and on a 64x64 mask whose pairs would share K/V (the shared-K/V default yields to the
# one-block tile): .carry/j29's build. Which kernel each runs, then the four tail cases of
# cli_cases.sh under the three sanitizers.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/j29/fm.xz j29 "$(cat .carry/j29/COMMIT)"
B=/tmp/j29/fragmask
source bench/suite/cli_cases.sh
fm_cli_cases "$B" $OUT/cases
for c in "${cases[@]}"; do
  n=${c%%|*}; a=${c#*|}
  case $n in *tail*) echo "$n: $($B $a 2>&1 | grep -E '^error|^kernel' | sed 's/AttentionKernel { geometry: Geometry { //' | cut -c1-150)";; esac
done
CASES='tail' timeout 150 bash bench/suite/sanitize.sh /tmp/j29 > $OUT/san.txt 2>&1
cat $OUT/sanitize/summary.txt; rm -rf $OUT/sanitize $OUT/cases
