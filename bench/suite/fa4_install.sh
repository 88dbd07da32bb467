#!/usr/bin/env bash
# On the GPU machine: unpack one folder of bench/suite/fa4_parts.py into /tmp/fa4site; once
# every folder's chunk of the CUTLASS DSL wheel has arrived (consecutive calls, the machine
# kept warm), join and unpack it and check that flash_attn.cute imports.
set -euo pipefail
part=${1:?usage: fa4_install.sh FOLDER}
site=/tmp/fa4site
mkdir -p "$site" /tmp/fa4parts
cp "$part"/cu13.chunk.* /tmp/fa4parts/
for w in "$part"/*.whl; do [ -e "$w" ] && python3 -m zipfile -e "$w" "$site"; done
name=$(sed -n 1p "$part/cu13.name")
count=$(sed -n 2p "$part/cu13.name")
have=$(ls /tmp/fa4parts/cu13.chunk.* | wc -l)
if [ "$have" -lt "$count" ]; then
    echo "fa4: $have of $count chunks here; carry the next folder in the next call"
    exit 0
fi
cat /tmp/fa4parts/cu13.chunk.* > "/tmp/fa4parts/$name"
python3 -m zipfile -e "/tmp/fa4parts/$name" "$site"
PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages python3 -c 'import flash_attn.cute, cutlass.cute; print("fa4: flash_attn.cute ready in /tmp/fa4site")'
