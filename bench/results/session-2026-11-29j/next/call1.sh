#!/usr/bin/env bash
# Next session's first call, main's HEAD built into .carry/$DIR (fm.xz, COMMIT, the wheel):
#   DIR=k43a bash bench/results/session-2026-11-29j/next/call1.sh
# 1. a hang guard; 2. the deterministic selftest (with the two new 64x64 cases, and the
# walks' new upload, 99e8c7f); 3. sanitizers on the new cases; 4. the Python GPU and
# torch tests; 5. the 4-plane default against --head-section 8 (never timed as a default);
# 6. the suite's deterministic rows. About 500 s.
source bench/suite/device_env.sh
DIR=${DIR:?DIR=<.carry folder>}
C=$(cat .carry/$DIR/COMMIT)
fm_unxz .carry/$DIR/fm.xz N "$C"
F=/tmp/N/fragmask
timeout 40 $F bench backward --random 1,16,16,16384,16384,128 --deterministic --synthetic-mask blocksparse:0.1:0.5 --json --warmup 2 --iters 5 > "$OUT/guard.txt" 2>&1
rc=$?; echo "guard rc=$rc"; tail -c 300 "$OUT/guard.txt"; [ $rc -eq 0 ] || exit 1
timeout 120 $F attention --backward --selftest --cases "deterministic" > "$OUT/selftest-det.txt" 2>&1; echo "selftest rc=$?"
grep -c "^PASS" "$OUT/selftest-det.txt"; grep "^FAIL" "$OUT/selftest-det.txt" | head -5
for tool in memcheck racecheck synccheck; do
  for c in "deterministic [64x64] block-sparse x5 d128" "deterministic [64x64] random 50% x5 d64"; do
    tag=$(echo $c | cut -c15-40 | tr -c 'a-z0-9' '_')
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 99 $F attention --backward --selftest --cases "$c" > "$OUT/san-$tool-$tag.txt" 2>&1
    echo "$tool [$c] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $OUT/san-$tool-$tag.txt | tail -1)"
  done
done
site=$(fm_install .carry/$DIR)
(cd crates/python/tests && PYTHONPATH=$site timeout 200 python3 -m unittest test_gpu test_torch) > "$OUT/pytests.txt" 2>&1; echo "pytests rc=$?"
grep -E "^Ran|^OK|^FAILED|^FAIL:|^ERROR:" "$OUT/pytests.txt" | head
for r in 0 1; do for m in blocksparse:0.1:0.5 blocksparse:0.5:0.5; do for sec in "" "--head-section 8"; do
  ms=$(timeout 60 $F bench backward --random 1,16,16,16384,16384,128 --json --warmup 5 --iters 20 --synthetic-mask $m --deterministic $sec | tail -1 | python3 -c "import json,sys; print(round(json.load(sys.stdin)['ms_median'],4))")
  echo "round $r $m [${sec:-default}] $ms" | tee -a "$OUT/default-vs-8.txt"
done; done; done
timeout 150 python3 bench/suite/run.py --isolate --site "$site" --bin $F --commit "$C" --systems fragmask,fragmask_cli --only '[.]det$' --output "$OUT/suite-det.jsonl" > "$OUT/suite-det.log" 2>&1; echo "suite rc=$?"; grep -E "^bwd" "$OUT/suite-det.log" | tail -10
