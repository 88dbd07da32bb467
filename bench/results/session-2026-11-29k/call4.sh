#!/usr/bin/env bash
# Write-up 002's deterministic rows (the 64-token tile's one-warpgroup writer): planes per
# section, walk orders on/off, the consumers' turns, against the default; and the
# non-deterministic time beside.
source bench/suite/device_env.sh
K=.carry/k43c; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
S=bench/results/session-2026-11-29k
timeout 420 python3 $S/detflags.py $F 'bwd[.]wu002[.]blocks(10|50)$' 2 "--deterministic" "--deterministic --head-section 1" \
  "--deterministic --head-section 4" "--deterministic --head-section 12" "--deterministic --deterministic-walks off" \
  "--deterministic --dq-writer off" "--paired-keys off" "" > $R/detflags.txt 2>&1; echo "rc=$?"
cat $R/detflags.txt | cut -c1-200
