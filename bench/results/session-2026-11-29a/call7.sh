#!/usr/bin/env bash
# Call 7: the paired backward's dS barrier as barrier.sync (not .aligned) in both branches
# (k33d, uncommitted build; its SASS is byte-identical to 605f1e0's): does synccheck still
# report the odd key-block counts? Then the five selftest cases that call 6 found.
set -uo pipefail
source bench/suite/device_env.sh
fm_unxz .carry/k33d/fm.xz k33d wip
bin=/tmp/k33d/fragmask
sc() { timeout 60 compute-sanitizer --tool synccheck --error-exitcode 99 "$@" > $OUT/last.txt 2>&1; local rc=$?; echo "rc=$rc $(grep -c 'Barrier error' $OUT/last.txt) barrier errors"; }
echo "CLI 64x64 d128 Sk=320 paired on: $(sc $bin attention --backward --random 1,2,2,256,320,128 --block 64x64 --synthetic-mask random:0.5 --paired-keys on)"
grep -m1 -A3 "Barrier error" $OUT/last.txt
echo "CLI 64x64 d128 Sk=384 blocksparse paired on: $(sc $bin attention --backward --random 1,2,2,256,384,128 --block 64x64 --synthetic-mask blocksparse:0.3:1 --paired-keys on)"
