#!/usr/bin/env bash
# Call 4: FlashAttention-4 part 1 of 2 (bench/suite/fa4_parts.py's xz format, .carry/fa4xz); HEAD's wheel installed.
set -uo pipefail
source bench/suite/device_env.sh
SECONDS=0
bash bench/suite/fa4_install.sh .carry/fa4xz/p1
fm_unxz .carry/k35a/fm.xz k35a "$(cat .carry/k35a/COMMIT)"; cp .carry/k35a/COMMIT /tmp/k35a/COMMIT
site=$(fm_install .carry/k35a); echo "installed in $site, ${SECONDS}s"
