"""A layout="bshd" caller's forward followed by what a model does next, out.reshape(B, S,
H * D) (free on a contiguous [B, S, H, D] output, a copy on a transposed view), timed per
call with CUDA events; also the autograd forward. One JSON line per shape.

    python3 bshd_out.py SITE TAG
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

import fragmask  # noqa: E402


def timed(fn, n=40):
    for _ in range(5):
        fn()
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


for S, causal in ((4096, False), (4096, True), (16384, False), (16384, True)):
    g = torch.Generator(device="cuda").manual_seed(0)
    B, H, D = 1, 16, 128
    q, k, v = (torch.randn((B, S, H, D), device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))

    def fwd():
        return fragmask.attention(q, k, v, causal=causal, layout="bshd").reshape(B, S, H * D)

    qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))

    def fwd_grad():
        return fragmask.attention(qg, kg, vg, causal=causal, layout="bshd").reshape(B, S, H * D)

    out = fragmask.attention(q, k, v, causal=causal, layout="bshd")
    print(json.dumps({"tag": sys.argv[2], "S": S, "causal": causal,
                      "fwd_reshape_ms": timed(fwd), "autograd_fwd_reshape_ms": timed(fwd_grad),
                      "out_contiguous": out.is_contiguous()}))
