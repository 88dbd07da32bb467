#!/usr/bin/env bash
# Call 4: the suite's rows at 35ff81a (k41e): the deterministic table (8 planes per section)
# and head dim 256's block-sparse rows at the 128x128 tile in both columns, with Flex; then
# the deterministic selftest's list cases at the default section.
source bench/suite/device_env.sh
fm_unxz .carry/k41e/fm.xz E 35ff81a
site=$(fm_install .carry/k41e)
timeout 200 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/E/fragmask --commit 35ff81a --systems fragmask,fragmask_cli --only '[.]det$' --output "$OUT/suite-det.jsonl" > "$OUT/suite-det.log" 2>&1; echo "det rc=$?"; grep -E "^bwd" "$OUT/suite-det.log" | tail -12
timeout 200 python3 bench/suite/run.py --isolate --site "$site" --bin /tmp/E/fragmask --commit 35ff81a --systems fragmask,fragmask_cli,flex --only '^fwd[.]d256[.]s(16384|4096)[.]blocksparse10$' --output "$OUT/suite-d256.jsonl" > "$OUT/suite-d256.log" 2>&1; echo "d256 rc=$?"; grep -E "^fwd" "$OUT/suite-d256.log" | tail -8
timeout 100 /tmp/E/fragmask attention --backward --selftest --cases "deterministic [" > "$OUT/selftest-det-lists.txt" 2>&1; echo "selftest rc=$?"; grep -c "^PASS" "$OUT/selftest-det-lists.txt"; tail -1 "$OUT/selftest-det-lists.txt"
