"""Small layout="bshd" calls for compute-sanitizer: O written through [B, S, H, D] strides on
the one-tile grid, with a mask (tile lists), split-KV (the combine), and the backward.

    compute-sanitizer --tool memcheck python3 sanitize_bshd.py SITE
"""
import sys

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

import fragmask  # noqa: E402

g = torch.Generator(device="cuda").manual_seed(0)
B, S, H, Hk, D = 2, 300, 4, 2, 128
q = torch.randn((B, S, H, D), device="cuda", dtype=torch.bfloat16, generator=g)
k, v = (torch.randn((B, S, Hk, D), device="cuda", dtype=torch.bfloat16, generator=g)
        for _ in range(2))
m = fragmask.Mask.from_dense(torch.rand(S, S, device="cuda", generator=g) < 0.4,
                             transposed=True).to("cuda")
ref = fragmask.attention(*(t.transpose(1, 2).contiguous() for t in (q, k, v)), causal=True)
outs = [fragmask.attention(q, k, v, causal=True, layout="bshd"),
        fragmask.attention(q, k, v, m, layout="bshd"),
        fragmask.attention(q, k, v, causal=True, layout="bshd", splits=3)]
qg = q.detach().requires_grad_(True)
o = fragmask.attention(qg, k, v, causal=True, layout="bshd")
o.backward(torch.ones_like(o))
torch.cuda.synchronize()
err = ((outs[0].transpose(1, 2).double() - ref.double()).norm() / ref.double().norm()).item()
print(f"bshd O: {len(outs)} forwards and a backward ran; causal rel err {err:.2e}; "
      f"contiguous {[x.is_contiguous() for x in outs]}")
