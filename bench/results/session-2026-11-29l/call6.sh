#!/usr/bin/env bash
# HEAD (ad60bfd): the backward selftest's paired and deterministic cases, the Python GPU and
# torch tests with this wheel.
source bench/suite/device_env.sh
K=.carry/k44f; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $F attention --backward --selftest --cases "deterministic [64x64] paired" > $R/guard.txt 2>&1; rc=$?; echo "guard rc=$rc"; [ $rc -eq 0 ] || exit 1
timeout 100 $F attention --backward --selftest --cases "deterministic" > $R/selftest-det.txt 2>&1; echo "selftest det rc=$? $(grep -c '^PASS' $R/selftest-det.txt) pass $(grep -c '^FAIL' $R/selftest-det.txt) fail"
timeout 60 $F attention --backward --selftest --cases "paired" > $R/selftest-paired.txt 2>&1; echo "selftest paired rc=$? $(grep -c '^PASS' $R/selftest-paired.txt) pass $(grep -c '^FAIL' $R/selftest-paired.txt) fail"
site=$(fm_install $K)
(cd crates/python/tests && PYTHONPATH=$site timeout 150 python3 -m unittest test_gpu test_torch) > $R/pytests.txt 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" $R/pytests.txt | head
