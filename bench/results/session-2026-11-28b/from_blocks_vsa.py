"""Write-up 002's VSA shape (N=23296, H=12, D=128) with Mask.from_blocks lists built on the
host and no with_transposed(): which backward runs (paired or not) and its time. CUDA-event
medians of 10 calls after 3; the backward is the forward+backward step minus the forward."""
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


N, H, D = 23296, 12, 128
nb = N // 64
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, H, N, D, dtype=torch.bfloat16, generator=g).cuda().requires_grad_()
           for _ in range(3))
do = torch.randn(1, H, N, D, dtype=torch.bfloat16, generator=g).cuda()
print(f"# {torch.cuda.get_device_name()}, fragmask from {fragmask.__file__}")
print("| kept | forward ms | backward ms | paired |")
print("|---|---|---|---|")
for keep in (0.1, 0.5):
    kk = int(round(keep * nb))
    index = torch.rand(H, nb, nb, generator=g).argsort(-1)[..., :kk].sort(-1).values
    num = torch.full((H, nb), kk, dtype=torch.int64)
    m = Mask.from_blocks(index, num, seqlen_q=N, seqlen_k=N, block=(64, 64))
    with torch.no_grad():
        fwd = ms(lambda: fragmask.attention(q, k, v, m))
    step = ms(lambda: torch.autograd.grad(fragmask.attention(q, k, v, m), (q, k, v), do))
    entries = [e for key, e in _ops._fwd_plans.items() if key[8] == m._meta[8]]
    paired = {h.paired_keys for e in entries for h in e[_ops._BWD][6].values()}
    print(f"| {keep:.0%} | {fwd:.3f} | {step - fwd:.3f} | {paired} |")
