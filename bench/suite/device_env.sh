# Sourced by the suite's device scripts (GPU machine, repository root): CUDA libraries,
# unbuffered Python, FA4 if /tmp/fa4site holds it, and `fm_install BUILD` which installs a
# build folder's wheel (fragmask-*.whl) once into /tmp/fm_suite-<commit> and prints that folder.
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/fragmask_out}
mkdir -p "$OUT"
if [ -d /tmp/fa4site/flash_attn ]; then
    export FA4_SITE=/tmp/fa4site
fi
fm_install() {
    local build=$1 commit site
    commit=$(cat "$build/COMMIT" 2>/dev/null || basename "$build")
    site=/tmp/fm_suite-$commit
    if [ ! -d "$site/fragmask" ]; then
        python3 -m pip install -q --no-index --no-deps --target "$site" "$build"/fragmask-*.whl >&2 || return 1
    fi
    echo "$site"
}
