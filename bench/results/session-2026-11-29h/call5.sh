#!/usr/bin/env bash
# Call 5 (run inline): 4 rounds of the rows call 4's single round put above 1.02 (all on the
# window walk, which this change does not touch) and the two list rows it changes, c7990ce
# against 0728792.
source bench/suite/device_env.sh; fm_unxz .carry/k40b/fm.xz N "$(cat .carry/k40b/COMMIT)" && cp .carry/k40b/*.whl /tmp/N/; fm_unxz .carry/k39f/fm.xz B "$(cat .carry/k39f/COMMIT)" && cp .carry/k39f/*.whl /tmp/B/; timeout 400 python3 bench/suite/run.py --ab /tmp/B /tmp/N --rounds 4 --systems fragmask --only '^bwd[.](gqa64[.]s16384[.]causal|gqa[.]s8192[.]causal|s16384[.]none|s16384[.]blocksparse10|s16384[.]topk8)$' --out "$OUT" > "$OUT/ab.log" 2>&1; echo rc=$?; rm -rf "$OUT"/ab-*-rounds; grep -E "^\| bwd" "$OUT/ab.log" | tail -5
