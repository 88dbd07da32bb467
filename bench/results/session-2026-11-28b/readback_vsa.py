"""Write-up 002's VSA shape (N=23296, H=12, D=128, 10% / 50% of 64-token blocks) through the
torch op with a mask packed on the GPU: its lists on the device only (one-block forward,
unpaired backward), then read back once with mask.to("cpu") (shared-K/V forward, paired
backward). CUDA-event medians; the backward is the forward+backward step minus the forward."""
import sys

import torch

import fragmask
from fragmask import Mask, _ops


def ms(fn, n=10):
    for _ in range(3):
        fn()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[n // 2]


def plans(m):
    entries = [e for key, e in _ops._fwd_plans.items() if key[8] == m._meta[8]]
    return ({e[_ops._HANDLE].shared_kv for e in entries},
            {h.paired_keys for e in entries for h in e[_ops._BWD][6].values()})


N, H, D = 23296, 12, 128
nb = N // 64
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(1, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g)
           .requires_grad_() for _ in range(3))
do = torch.randn(1, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g)
print(f"# {torch.cuda.get_device_name()}")
print("| kept | mask | forward ms | backward ms | shared K/V, paired |")
print("|---|---|---|---|---|")
for keep in (0.1, 0.5):
    blocks = torch.rand(H, nb, nb, device="cuda", generator=g) < keep
    dense = blocks.repeat_interleave(64, 1).repeat_interleave(64, 2)
    m = Mask.from_dense(dense, block=(64, 64), transposed=True)
    del dense
    torch.cuda.synchronize()
    for label in ("GPU-packed", "read back"):
        if label == "read back":
            m.to("cpu")
        with torch.no_grad():
            fwd = ms(lambda: fragmask.attention(q, k, v, m))
        step = ms(lambda: torch.autograd.grad(fragmask.attention(q, k, v, m), (q, k, v), do))
        print(f"| {keep:.0%} | {label} | {fwd:.3f} | {step - fwd:.3f} | {plans(m)} |")
        sys.stdout.flush()
    del m
    torch.cuda.empty_cache()
