#!/usr/bin/env bash
# The branch h/det-paired-walks with the fill threshold (46bc0fc) against main (08bc62e):
# hang guard, the deterministic and paired selftest cases, write-up 002's four backward rows
# (ABBA, 2 pairs), the suite's 8 deterministic rows, the Python GPU and torch tests.
source bench/suite/device_env.sh
K=.carry/k44c; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask; fm_unxz $K/fm_main.xz main "$(cat $K/COMMIT_main)"; M=/tmp/main/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 60 $F attention --backward --selftest --cases "deterministic [64x64] paired block-sparse x5 d128 odd" > $R/guard.txt 2>&1; rc=$?; echo "guard rc=$rc"; [ $rc -eq 0 ] || exit 1
timeout 150 $F attention --backward --selftest --cases "deterministic" > $R/selftest-det.txt 2>&1; echo "selftest det rc=$? $(grep -c '^PASS' $R/selftest-det.txt) pass"; grep "^FAIL" $R/selftest-det.txt | head -3
timeout 90 $F attention --backward --selftest --cases "paired" > $R/selftest-paired.txt 2>&1; echo "selftest paired rc=$? $(grep -c '^PASS' $R/selftest-paired.txt) pass"; grep "^FAIL" $R/selftest-paired.txt | head -3
timeout 120 python3 bench/results/session-2026-11-29k/binab.py $M $F 'bwd[.]wu002[.]blocks(10|50)([.]det)?$' 2 "" > $R/ab.txt 2>&1; echo "ab rc=$?"; cut -c1-200 $R/ab.txt
site=$(fm_install $K)
timeout 200 python3 bench/suite/run.py --isolate --site "$site" --bin $F --commit "$C" --systems fragmask,fragmask_cli --only '[.]det$' --output "$R/suite-det.jsonl" > "$R/suite-det.log" 2>&1; echo "suite rc=$?"; grep -E "^bwd" "$R/suite-det.log" | tail -16
(cd crates/python/tests && PYTHONPATH=$site timeout 180 python3 -m unittest test_gpu test_torch) > $R/pytests.txt 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" $R/pytests.txt | head
