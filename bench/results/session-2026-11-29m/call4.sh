#!/usr/bin/env bash
# The backward's knobs on the H200 for issue 24's missed head-dim-128 rows (against FA4: GQA 32:8
# causal 0.970, 64:8 0.993, causal 0.956, no mask 0.948), one binary (ad60bfd; HEAD's kernels).
# DIR=k45c: fm.xz, COMMIT. 2 ABBA pairs per variant (bench.suite.flag_pairs), one run per row.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm.xz fm "$(cat $K/COMMIT)"; B=/tmp/fm/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
fp() { local tag=$1 name=$2; shift 2; timeout ${T:-120} python3 -m bench.suite.flag_pairs $B "^bwd[.]$name\$" 2 "$@" --output $R/$tag.json --commit ad60bfd > $R/$tag.txt 2>&1; echo "$tag rc=$?"; }
T=150 fp gqa32 'gqa[.]s16384[.]causal' "--group-slices 1" "--group-slices 4" "--head-section 1" "--head-section 4"
T=150 fp gqa64 'gqa64[.]s16384[.]causal' "--group-slices 2" "--group-slices 8" "--head-section 1" "--head-section 4"
T=120 fp causal 's16384[.]causal' "--bwd-stages 3" "--head-section 1" "--head-section 4" "--tile-order off"
T=60 fp none 's16384[.]none' "--bwd-stages 3"
cut -c1-130 $R/*.txt
