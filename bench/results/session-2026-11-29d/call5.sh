#!/usr/bin/env bash
# Call 5: the Python package's GPU and torch tests (with the deterministic ones) on 9a969d3's wheel,
# then the suite's deterministic backward rows and their non-deterministic twins.
set -uo pipefail
source bench/suite/device_env.sh
C=$(cat .carry/k36g/COMMIT)
fm_unxz .carry/k36g/fm.xz G "$C"
site=$(fm_install .carry/k36g)
bin=/tmp/G/fragmask
SECONDS=0
(cd crates/python/tests && PYTHONPATH=$site FRAGMASK_BIN=$bin timeout 200 python3 -m unittest test_gpu test_torch > "$OUT/py.txt" 2>&1; echo "py rc=$? ${SECONDS}s")
grep -E "^(FAIL|ERROR):" "$OUT/py.txt" | head; tail -3 "$OUT/py.txt"
grep -E "determin" "$OUT/py.txt" | head -5
out="$OUT/suite-$(date -u +%Y-%m-%d-%H%M)-$C-det-h200.jsonl"
timeout 250 python3 bench/suite/run.py --isolate --only '^bwd[.]s16384[.](none|causal|window1024|random50)([.]det)?$' \
  --site "$site" --systems fragmask,fragmask_cli --commit "$C" --bin $bin --output "$out" --budget-s 230 2>&1 | tail -14
echo "== $(grep -c '"status": "ok"' "$out") ok rows, ${SECONDS}s"
