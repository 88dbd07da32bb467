#!/usr/bin/env bash
# Second GPU run of the "bwdaux" work (issue 13): the GPU packer's transposed lists again
# (the word-gather transcode: GPU == CPU, sanitizers, timing), the Python autograd tests,
# a CLI backward checked against torch fp32 autograd (backward_bench.py --check), and the
# backward workloads side by side (backward_bench.py). Logs: $OUT/logs.tgz.
# Usage on the device: bash bench/bwdaux_gpu_run.sh CARRY_DIR
set -u
C=${1:-.carry-bwdaux}
BIN=$C/fragmask
ABS_BIN=$(pwd)/$BIN
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
L=/tmp/bwdaux-logs
mkdir -p "$L" "$OUT"
trap 'tar czf "$OUT/logs.tgz" -C "$L" .' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv > "$L/device.txt" 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$C"/*.whl \
    && export PYTHONPATH=/tmp/site
echo "== GPU packer, transposed lists"
timeout 60 "$BIN" verify --packer-only > "$L/verify_packer.txt" 2>&1
echo "verify rc $? $(grep -E 'checks:' "$L/verify_packer.txt")"
grep FAIL "$L/verify_packer.txt" | head -5
for tool in memcheck racecheck synccheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 "$BIN" verify --packer-only \
        --sanitizer-friendly > "$L/sanitizer_$tool.txt" 2>&1
    echo "$tool rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/sanitizer_$tool.txt" | tail -1)"
done
for block in 128x128 64x64; do
    timeout 30 "$BIN" bench packer --transposed --block $block --runs 30 \
        --json "$L/packer_$block.json" > "$L/packer_$block.txt" 2>&1
    grep -E "GPU packer:|transposed|add_transposed" "$L/packer_$block.txt"
done
echo "== per-kernel durations (ncu), 128x128, random 50% 16384^2: 4 packs, then 4 transpositions"
timeout 90 ncu --metrics gpu__time_duration.sum -k regex:fragmask_pack --launch-count 24 \
    "$BIN" bench packer --transposed --runs 1 --no-cpu > "$L/ncu_packer.txt" 2>&1
echo "ncu rc $?"
python3 - "$L/ncu_packer.txt" <<'PY'
import re, sys, collections
durs, kernel = collections.defaultdict(list), None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s+(fragmask_pack_\w+)\s*\(.*Context", line)
    if m:
        kernel = m.group(1)
    m = re.search(r"gpu__time_duration.sum\s+(\w+)\s+([\d.,]+)", line)
    if m and kernel:
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3,
                 "ms": 1e3}.get(m.group(1), float("nan"))
        durs[kernel].append(float(m.group(2).replace(",", "")) * scale)
        kernel = None
for k, v in durs.items():
    print(f"{k:<28} n={len(v):<3} median {sorted(v)[len(v) // 2]:9.1f} us")
PY
echo "== Python GPU tests (autograd, GPU packer, attention)"
(cd "$C/pytests" && FRAGMASK_BIN="$ABS_BIN" timeout 110 python3 -m unittest -v test_gpu.AutogradTests \
    test_gpu.GpuPackerTests test_gpu.AttentionTests > "$L/python_gpu_tests.txt" 2>&1
 echo "python tests rc $?")
grep -E "^(FAIL|ERROR):|^Ran |^OK|^FAILED" "$L/python_gpu_tests.txt"
echo "== CLI backward vs torch fp32 autograd (S=2048, H=4, D=128, random 50%)"
W=/tmp/bwdaux-check; mkdir -p $W
timeout 60 python3 - "$W" <<'PY' > "$L/cli_check.txt" 2>&1
import sys, numpy as np, torch
from safetensors.torch import save_file
w = sys.argv[1]
g = torch.Generator().manual_seed(2048)
q, k, v, do = (torch.randn(1, 4, 2048, 128, generator=g).to(torch.bfloat16) for _ in range(4))
save_file({"q": q, "k": k, "v": v, "do": do}, f"{w}/in.safetensors")
m = torch.rand(2048, 2048, generator=g) < 0.5
m[5] = False
np.save(f"{w}/dense.npy", m.numpy())
PY
( timeout 30 "$BIN" pack --mask $W/dense.npy --transposed -q -o $W/m.safetensors \
  && timeout 60 "$BIN" attention --inputs $W/in.safetensors --d-o $W/in.safetensors \
       --mask $W/m.safetensors --backward --out $W/g.safetensors \
  && timeout 60 python3 "$C/bench/backward_bench.py" --check $W/g.safetensors \
       --inputs $W/in.safetensors --mask-npy $W/dense.npy ) >> "$L/cli_check.txt" 2>&1
echo "cli check rc $?"; tail -6 "$L/cli_check.txt"
echo "== backward_bench.py"
timeout 100 python3 "$C/bench/backward_bench.py" --bin "$BIN" --out "$L" --workdir /tmp/bwd \
    --iters 10 > "$L/backward_bench.txt" 2>&1
echo "backward_bench rc $?"
tail -22 "$L/backward_bench.txt"
