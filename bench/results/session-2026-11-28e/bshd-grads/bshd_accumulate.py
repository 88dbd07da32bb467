"""A layout="bshd" training step's backward with the gradients accumulated into existing
`.grad` tensors (what a model does), timed per call: where the kernels write the gradients
decides whether autograd adds them contiguously or through strided views. One JSON line per
shape.

    python3 bshd_accumulate.py SITE TAG
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

    def step():
        out.backward(do, retain_graph=True)

    for _ in range(5):
        step()
    times = []
    for _ in range(30):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    print(json.dumps({"tag": sys.argv[2], "S": S, "causal": causal,
                      "ms": times[len(times) // 2],
                      "grad_contiguous": all(t.grad.is_contiguous() for t in (q, k, v))}))
