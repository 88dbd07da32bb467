#!/usr/bin/env bash
# The whole forward table, HEAD before the split tail (/tmp/A) against the change (/tmp/B):
# interleaved ABBA rounds, CLI rows, one shard of two per device call (usage: ab_forward.sh I/2).
source bench/suite/device_env.sh
python3 bench/suite/run.py --ab /tmp/A /tmp/B --interleave --rounds 2 --systems fragmask_cli \
    --only '^fwd[.]' --shard "$1" --out "$OUT/ab" 2>&1 | grep -E '^\| fwd' 
