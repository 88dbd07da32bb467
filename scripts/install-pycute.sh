#!/usr/bin/env bash
# Installs NVIDIA's pycute (the Python reference of CuTe's layout algebra) for the
# calculator's cross-check (tests/cute_crosscheck.rs). pycute ships inside the PyPI
# package nvidia-cutlass; it is pure Python and needs nothing else, so the package is
# installed without its dependencies into $FRAGMASK_PYCUTE_PATH (default ./.cache/py).
# Idempotent. Prints the PYTHONPATH to use on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
target="${FRAGMASK_PYCUTE_PATH:-$repo/.cache/py}"
version="4.2.0.0"
python="${PYTHON:-python3}"

if ! PYTHONPATH="$target" "$python" -c 'import pycute' 2>/dev/null; then
    echo "installing pycute (nvidia-cutlass==$version, no dependencies) into $target" >&2
    mkdir -p "$target"
    "$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        --no-deps --upgrade --target "$target" "nvidia-cutlass==$version" >&2
    PYTHONPATH="$target" "$python" -c 'import pycute' >&2
fi
echo "$target"
