#!/usr/bin/env bash
set -u
bash bench/suite/ncu_pair.sh .carry/s15/base fragmask bwd --causal
rm -f $OUT/ncu-fragmask-bwd-causal.log
ls -la $OUT
