#!/usr/bin/env bash
# compute-sanitizer over the whole backward selftest at HEAD's kernels (ad60bfd's binary: the
# same SASS, and since c1cf060 the same CUDA text): memcheck and synccheck on every case,
# racecheck on the deterministic and paired cases (the sweep of the thirty-third session ran
# before those kernels existed). DIR=k45c.
source bench/suite/device_env.sh
K=.carry/${DIR:?DIR=<.carry folder>}; R=$OUT/r; mkdir -p $R
fm_unxz $K/fm.xz fm "$(cat $K/COMMIT)"; B=/tmp/fm/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
run() { local tag=$1 tool=$2 lim=$3; shift 3
  timeout $lim compute-sanitizer --tool $tool --error-exitcode 99 $B attention --backward --selftest "$@" > $R/$tag.txt 2>&1
  echo "$tag rc=$? $(grep -c '^PASS' $R/$tag.txt) pass $(grep -c '^FAIL' $R/$tag.txt) fail $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $R/$tag.txt | tail -1)"; }
run memcheck-all memcheck 190
run synccheck-all synccheck 190
run racecheck-det racecheck 70 --cases "deterministic"
run racecheck-paired racecheck 60 --cases "paired"
