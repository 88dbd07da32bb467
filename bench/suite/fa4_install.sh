#!/usr/bin/env bash
# On the GPU machine: keep one folder of bench/suite/fa4_parts.py (a byte range of the site
# tree's tar.xz); once every folder's range has arrived (consecutive calls, the machine kept
# warm), join them, unpack into /tmp/fa4site and check that flash_attn.cute imports.
set -euo pipefail
part=${1:?usage: fa4_install.sh FOLDER}
site=/tmp/fa4site
mkdir -p "$site" /tmp/fa4parts
cp "$part"/fa4site.tar.xz.* /tmp/fa4parts/
count=$(sed -n 1p "$part/fa4site.count")
have=$(ls /tmp/fa4parts/fa4site.tar.xz.* | wc -l)
if [ "$have" -lt "$count" ]; then
    echo "fa4: $have of $count parts here; carry the next folder in the next call"
    exit 0
fi
cat /tmp/fa4parts/fa4site.tar.xz.* | python3 -c '
import sys, tarfile
kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall(sys.argv[1], **kw)' "$site"
PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages python3 -c 'import flash_attn.cute, cutlass.cute; print("fa4: flash_attn.cute ready in /tmp/fa4site")'
