#!/usr/bin/env bash
# Creates the tests' Python virtual environment ($FRAGMASK_PYENV, default ./.cache/pyenv)
# with pinned maturin (builds the Python package), numpy and safetensors (the numpy
# decoders of docs/masks.md, run by tests/pack_cli.rs and tests/transposed_cli.rs).
# Idempotent. Prints the environment's interpreter on its last line. Called by
# scripts/test.sh (before the Rust tests) and scripts/test-python.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
venv="${FRAGMASK_PYENV:-$repo/.cache/pyenv}"
python="${PYTHON:-python3}"
maturin_version="1.9.4"
numpy_version="2.2.6"
safetensors_version="0.7.0"

if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    echo "creating $venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi
if ! "$venv/bin/python" - "$maturin_version" "$numpy_version" "$safetensors_version" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
assert [version(p) for p in ("maturin", "numpy", "safetensors")] == sys.argv[1:]
PY
    echo "installing maturin==$maturin_version numpy==$numpy_version" \
        "safetensors==$safetensors_version into $venv" >&2
    "$venv/bin/python" -m pip --quiet --disable-pip-version-check install \
        "maturin==$maturin_version" "numpy==$numpy_version" \
        "safetensors==$safetensors_version" >&2
fi
echo "$venv/bin/python"
