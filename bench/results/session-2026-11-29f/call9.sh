#!/usr/bin/env bash
# Call 9: the split tail for masks whose lists stay on the GPU: head dim 64 rows of
# device_only_splits.py on 82217cb's wheel (A: split-KV fix only) and 01bfb02's (B: the tail too).
set -u
source bench/suite/device_env.sh
siteA=$(fm_install .carry/k38b)
siteB=$(fm_install .carry/k38c)
for round in 1 2; do
  PYTHONPATH=$siteA timeout 60 python3 bench/results/session-2026-11-29f/device_only_splits.py A d64 2>&1 | tee -a "$OUT/tail.txt"
  PYTHONPATH=$siteB timeout 60 python3 bench/results/session-2026-11-29f/device_only_splits.py B d64 2>&1 | tee -a "$OUT/tail.txt"
done
