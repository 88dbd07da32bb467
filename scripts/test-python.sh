#!/usr/bin/env bash
# Builds the fragmask Python package (crates/python, PyO3 + maturin) and runs its CPU
# tests (crates/python/tests), in a virtual environment under ./.cache/pyenv that it
# creates on a fresh machine (scripts/install-pyenv.sh: pinned maturin, numpy and
# safetensors). torch is not installed: tests that need it are reported as skipped. Called by scripts/test.sh; under CI=true a
# missing Python, venv or build is a failure, elsewhere a missing Python is a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
venv="${FRAGMASK_PYENV:-$repo/.cache/pyenv}"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
        echo "error: $python not found (the Python package tests need it)" >&2
        exit 1
    fi
    echo "SKIPPED: Python package tests ($python not found)" >&2
    exit 0
fi
scripts/install-pyenv.sh >/dev/null
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)

# The wheel users get from `pip install ./crates/python`, built with the checked-in lock.
wheels="$repo/crates/python/target/wheels-test"
rm -rf "$wheels"
"$venv/bin/maturin" build --release --locked --quiet -m crates/python/Cargo.toml -o "$wheels" \
    -i "$venv/bin/python" >&2
"${pip[@]}" install --no-deps --force-reinstall "$wheels"/fragmask-*.whl >&2

"$venv/bin/python" -m unittest discover -s "$repo/bench/suite/tests" >&2  # the benchmark suite (no GPU)
# From another directory, so the tests import the installed package.
cd "$repo/crates/python/tests"
"$venv/bin/python" -m unittest discover -s . -v
