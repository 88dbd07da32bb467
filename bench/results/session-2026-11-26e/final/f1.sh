#!/usr/bin/env bash
# Final window, call 1 (x4 host): FA4 part 1 (nothing else fits beside it in one call's carry).
bash .fa4/part1/install-on-device.sh .fa4/part1 2>&1 | tail -1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
