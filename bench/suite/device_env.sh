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
# `fm_unxz XZ NAME COMMIT`: a binary carried xz-compressed (the carry's 64 MiB) unpacked
# into the build folder /tmp/NAME (`fragmask` + `COMMIT`, what run.py --ab takes).
fm_unxz() {
    mkdir -p "/tmp/$2" &&
        python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
            "$1" "/tmp/$2/fragmask" &&
        chmod +x "/tmp/$2/fragmask" && echo "$3" > "/tmp/$2/COMMIT"
}
