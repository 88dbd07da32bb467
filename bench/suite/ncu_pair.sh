#!/usr/bin/env bash
# Nsight Compute of fragmask's and FlashAttention-4's kernels on the same call, side by side
# (GPU machine, repository root, FA4 unpacked in /tmp/fa4site by ../shared/peers):
#
#   bash bench/suite/ncu_pair.sh BUILD SYSTEM PASS [--causal]    # SYSTEM fragmask|fa4, PASS fwd|bwd
#
# Profiles every kernel of one call (bench/suite/ncu_pair.py, --profile-from-start off) with the
# full section set and per-instruction sampling, and writes to $OUT/ncu-SYSTEM-PASS*:
# .raw.csv (every metric), .sass.csv (the SASS with samples and stall reasons per instruction);
# with NCU_BUNDLE=1 the three files as one ncu-SYSTEM-PASS*.tar.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: ncu_pair.sh BUILD SYSTEM PASS [--causal]}
system=${2:?}; pass=${3:?}; shift 3
source bench/suite/device_env.sh
site=$(fm_install "$build") || exit 1
tag="$system-$pass${1:+-causal}"
rep=/tmp/ncu-$tag
timeout 400 ncu --clock-control none --profile-from-start off --set full --import-source no \
    -f -o "$rep" python3 bench/suite/ncu_pair.py --system "$system" --pass "$pass" "$@" \
    --site "$site" --fa4 /tmp/fa4site > "$OUT/ncu-$tag.log" 2>&1
echo "ncu $tag rc=$?"
ncu -i "$rep.ncu-rep" --page raw --csv > "$OUT/ncu-$tag.raw.csv" 2>/dev/null
ncu -i "$rep.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu-$tag.sass.csv" 2>/dev/null
gzip -f "$OUT/ncu-$tag.sass.csv" "$OUT/ncu-$tag.raw.csv"
# NCU_BUNDLE=1: the three files of this call as one $OUT/ncu-TAG.tar (a device call returns at
# most 8 files; ncu_summary.py reads the bundles as it reads the files).
if [ "${NCU_BUNDLE:-0}" = 1 ]; then
    tar -cf "$OUT/ncu-$tag.tar" -C "$OUT" "ncu-$tag.log" "ncu-$tag.raw.csv.gz" "ncu-$tag.sass.csv.gz" \
        && rm -f "$OUT/ncu-$tag.log" "$OUT/ncu-$tag.raw.csv.gz" "$OUT/ncu-$tag.sass.csv.gz"
fi
