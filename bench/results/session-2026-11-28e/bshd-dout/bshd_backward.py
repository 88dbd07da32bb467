"""The eager backward of a layout="bshd" call, timed through autograd (dQ, dK, dV only):
what the dO copy costs. One JSON line per shape.

    python3 bshd_backward.py SITE TAG
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

import fragmask  # noqa: E402

for S, causal in ((4096, False), (4096, True), (16384, False), (16384, True)):
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (1, S, 16, 128)
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(4))
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    out = fragmask.attention(q, k, v, causal=causal, layout="bshd")
    grads = lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)  # noqa: E731
    for _ in range(5):
        grads()
    times = []
    for _ in range(30):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        grads()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    print(json.dumps({"tag": sys.argv[2], "S": S, "causal": causal, "ms": times[len(times) // 2]}))
