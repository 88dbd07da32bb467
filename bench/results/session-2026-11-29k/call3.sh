#!/usr/bin/env bash
# Main at $C (the writer on the 64-token tile's one warpgroup): the suite's deterministic
# rows (8, two new: write-up 002's), and the Python deterministic backward on a GPU-packed
# mask against the same mask read back with to("cpu").
source bench/suite/device_env.sh
K=.carry/k43c; R=$OUT/r; mkdir -p $R
C=$(cat $K/COMMIT); fm_unxz $K/fm.xz N "$C"; F=/tmp/N/fragmask
trap 'tar -C $OUT -czf $OUT/r.tgz r' EXIT
timeout 40 $F bench backward --random 1,16,16,16384,16384,128 --deterministic --synthetic-mask blocksparse:0.1:0.5 --json --warmup 2 --iters 5 > $R/guard.txt 2>&1; rc=$?; echo "guard rc=$rc"; [ $rc -eq 0 ] || exit 1
site=$(fm_install $K)
(PYTHONPATH=$site timeout 150 python3 bench/results/session-2026-11-29k/pydet.py) > $R/pydet.txt 2>&1; echo "pydet rc=$?"; tail -8 $R/pydet.txt
timeout 280 python3 bench/suite/run.py --isolate --site "$site" --bin $F --commit "$C" --systems fragmask,fragmask_cli --only '[.]det$' --output "$R/suite-det.jsonl" > "$R/suite-det.log" 2>&1; echo "suite rc=$?"; grep -E "^bwd" "$R/suite-det.log" | tail -16
