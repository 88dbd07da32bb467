#!/usr/bin/env bash
# Call 8: the session's start (e0931f3, A) against its end (a612346, B), deterministic, with B's
# non-deterministic time: interleaved, 2 rounds.
set -u
source bench/suite/device_env.sh
fm_unxz .carry/k35a/fm.xz A e0931f3
fm_unxz .carry/k36h/fm.xz B "$(cat .carry/k36h/COMMIT)"
NDCFG=0 timeout 330 python3 bench/results/session-2026-11-29d/det_pairs.py 2 /tmp/A/fragmask /tmp/B/fragmask | tee "$OUT/det_pairs.txt"
