#!/usr/bin/env bash
# Main at a1986bd (sections of at most 32768 query rows where the walk orders run): hang
# guard, the deterministic selftest, the suite's 8 deterministic rows.
source bench/suite/device_env.sh
K=.carry/k43d; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 40 $F bench backward --random 1,16,16,16384,16384,128 --deterministic --synthetic-mask blocksparse:0.1:0.5 --json --warmup 2 --iters 5 > $R/guard.txt 2>&1; rc=$?; echo "guard rc=$rc"; [ $rc -eq 0 ] || exit 1
timeout 120 $F attention --backward --selftest --cases "deterministic" > $R/selftest-det.txt 2>&1; echo "selftest rc=$? $(grep -c '^PASS' $R/selftest-det.txt) pass"; grep "^FAIL" $R/selftest-det.txt | head -3
site=$(fm_install $K)
timeout 280 python3 bench/suite/run.py --isolate --site "$site" --bin $F --commit "$C" --systems fragmask,fragmask_cli --only '[.]det$' --output "$R/suite-det.jsonl" > "$R/suite-det.log" 2>&1; echo "suite rc=$?"; grep -E "^bwd" "$R/suite-det.log" | tail -16
