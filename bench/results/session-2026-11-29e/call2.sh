#!/usr/bin/env bash
# Call 2: the rank-ahead branch's two commits apart. A = a612346 (main's deterministic kernels),
# B = both commits (4db1107), C = the 32-bit rotated rank alone (946210f, h/det-rot32):
# det_pairs.py, 3 interleaved rounds. Then the H200 backward rows with Flex (9a969d3's wheel;
# the non-deterministic backward kernels are byte-identical since).
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k36h/fm.xz A "$(cat .carry/k36h/COMMIT)"
fm_unxz .carry/k36i/fm.xz B "$(cat .carry/k36i/COMMIT)"
fm_unxz .carry/k37a/fm.xz C "$(cat .carry/k37a/COMMIT)"
timeout 200 /tmp/C/fragmask attention --backward --selftest --cases deterministic > "$OUT/selftest-det-C.txt" 2>&1
echo "C selftest rc=$? pass=$(grep -c '^PASS' "$OUT/selftest-det-C.txt") fail=$(grep -c '^FAIL' "$OUT/selftest-det-C.txt")"
NONDET=0 timeout 230 python3 bench/results/session-2026-11-29d/det_pairs.py 3 /tmp/A/fragmask /tmp/B/fragmask /tmp/C/fragmask | tee "$OUT/det_pairs.txt"
fm_unxz .carry/k36g/fm.xz G 9a969d3
site=$(fm_install .carry/k36g)
timeout 300 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/G/fragmask --commit 9a969d3 \
  --systems fragmask,flex --budget-s 280 \
  --only '^bwd[.](s16384[.](none|causal|window1024|docs12)|d64[.]s16384[.](none|causal)|gqa[.]s16384[.]causal|gqa64[.]s16384[.]causal)$' \
  --output "$OUT/suite-flex-bwd.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$?"; tail -15 "$OUT/suite.log"
