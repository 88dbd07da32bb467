"""Energy per call under sustained load: fragmask's and FlashAttention-4's backward (and
forward) at S=16384, H=16, D=128, each run back to back for SECONDS while nvidia-smi samples
the board power and SM clock every 50 ms. Prints calls/s, mean power, mean clock and J/call.

    python3 power.py SECONDS   (PYTHONPATH: fragmask's site and /tmp/fa4site)
"""
import subprocess
import sys
import time

import torch

sys.path[:0] = ["/tmp/fa4site", "/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages"]
import fragmask  # noqa: E402
from flash_attn.cute import flash_attn_func  # noqa: E402

seconds = float(sys.argv[1])
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(0)
B, H, S, D = 1, 16, 16384, 128
q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3))
do = torch.randn_like(q)


def fm(causal):
    def f(qq, kk, vv):
        return fragmask.attention(qq, kk, vv, None, causal=causal)
    return f


def fa4(causal):
    def f(qq, kk, vv):
        o = flash_attn_func(qq.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), causal=causal)
        o = o[0] if isinstance(o, tuple) else o
        return o.transpose(1, 2)
    return f


def backward_step(fn):
    qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = fn(qq, kk, vv)

    def step():
        torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)
    return step


def sustained(step):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    time.sleep(2.0)  # a cool start for each system
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw,clocks.sm", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        for _ in range(5):
            step()
        n += 5
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    smi.terminate()
    samples = [tuple(float(x) for x in line.split(",")) for line in smi.communicate()[0].splitlines() if "," in line]
    half = samples[len(samples) // 2:]  # the settled second half
    watts = sum(s[0] for s in half) / len(half)
    mhz = sum(s[1] for s in half) / len(half)
    return n / wall, watts, mhz, len(samples)


rows = []
for name, make in (("fragmask", fm), ("fa4", fa4)):
    for causal in (False, True):
        rate, watts, mhz, ns = sustained(backward_step(make(causal)))
        rows.append((f"bwd {'causal' if causal else 'none'}", name, rate, watts, mhz, ns))
for name, make in (("fa4", fa4), ("fragmask", fm)):   # the reverse order as a check
    rate, watts, mhz, ns = sustained(backward_step(make(False)))
    rows.append(("bwd none (2nd)", name, rate, watts, mhz, ns))
print(f"{torch.cuda.get_device_name()}; {seconds:.0f} s of back-to-back calls per system; power and clock: mean of the second half")
print(f"{'call':16s} {'system':9s} {'ms/call':>8s} {'W':>6s} {'MHz':>6s} {'J/call':>7s} samples")
for call, name, rate, watts, mhz, ns in rows:
    print(f"{call:16s} {name:9s} {1e3 / rate:8.3f} {watts:6.1f} {mhz:6.0f} {watts / rate:7.4f} {ns}")
