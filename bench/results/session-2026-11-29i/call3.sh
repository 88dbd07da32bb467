#!/usr/bin/env bash
# Call 3: deterministic section sizes (d0ff2fb), the Python A/B of the deterministic rows
# (f0ca87f against d0ff2fb), the suite's deterministic rows at d0ff2fb, and head dim 256's
# plan.run against fragmask.attention.
source bench/suite/device_env.sh
D=bench/results/session-2026-11-29i
fm_unxz .carry/k41a/fm.xz A f0ca87f && cp .carry/k41a/*.whl /tmp/A/
fm_unxz .carry/k41d/fm.xz B d0ff2fb && cp .carry/k41d/*.whl /tmp/B/
timeout 150 python3 $D/secsweep.py /tmp/B/fragmask "$OUT/secsweep.jsonl" > "$OUT/secsweep.txt" 2>&1; echo "sweep rc=$?"; tail -3 "$OUT/secsweep.txt"
site=$(fm_install .carry/k41d)
PYTHONPATH=$site timeout 90 python3 $D/opcheck.py > "$OUT/opcheck.txt" 2>&1; echo "opcheck rc=$?"; cat "$OUT/opcheck.txt" | tail -4
timeout 200 python3 bench/suite/run.py --ab /tmp/A /tmp/B --rounds 2 --systems fragmask --only '[.]det$' --out "$OUT" > "$OUT/ab.log" 2>&1; echo "ab rc=$?"; rm -rf "$OUT"/ab-*-rounds; grep -E "^\| bwd" "$OUT/ab.log" | tail -6
timeout 150 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/B/fragmask --commit d0ff2fb --systems fragmask,fragmask_cli --only '^bwd[.]s16384[.](blocksparse10|random50)[.]det$' --output "$OUT/suite-det.jsonl" > "$OUT/suite.log" 2>&1; echo "suite rc=$?"; tail -4 "$OUT/suite.log"
