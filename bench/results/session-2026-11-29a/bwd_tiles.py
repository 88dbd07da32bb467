"""The backward at head dim 64 on a 192x128 mask tile (3 warpgroups, the forward's tile under
head_dim=64) against 128x128, S=16384 H=16 random 50%: grads compared, backward and forward
timed through autograd in alternating rounds (one H200 or H100)."""
import sys
import torch
sys.path.insert(0, "bench/suite")
import common  # noqa: E402
import fragmask  # noqa: E402
from fragmask import Mask  # noqa: E402

common.WARMUP_MS = 500
torch.manual_seed(0)
B, H, S, D = 1, 16, int(sys.argv[1]) if len(sys.argv) > 1 else 16384, 64
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
do = torch.randn_like(q)
dense = torch.rand(S, S, device="cuda") < 0.5
dense[:, 0] = True
masks = {
    "128x128": Mask.from_dense(dense, transposed=True),
    "192x128": Mask.from_dense(dense, block=(192, 128), warpgroups=3, transposed=True),
}
for name, m in masks.items():
    assert m.block == tuple(int(x) for x in name.split("x")), (name, m.block)
grads, steps, fwds = {}, {}, {}
for name, m in masks.items():
    qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
    out = fragmask.attention(qq, kk, vv, m)
    grads[name] = [out.float()] + [g.float() for g in torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)]
    steps[name] = (lambda out=out, qq=qq, kk=kk, vv=vv: torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True))
    fwds[name] = (lambda m=m: fragmask.attention(q, k, v, m))
for i, what in enumerate(("out", "dq", "dk", "dv")):
    a, b = grads["128x128"][i], grads["192x128"][i]
    print(f"{what}: max|a-b| / max|a| = {((a - b).abs().max() / a.abs().max()).item():.2e}")
flops = 4 * B * H * S * S * D * 0.5
res = {n: {"bwd": [], "fwd": []} for n in masks}
for r in range(3):
    for name in (masks if r % 2 == 0 else reversed(list(masks))):
        res[name]["bwd"].append(common.cuda_ms(torch, steps[name], 3, 20)[0])
        res[name]["fwd"].append(common.cuda_ms(torch, fwds[name], 3, 20)[0])
for name in masks:
    b, f = sorted(res[name]["bwd"])[1], sorted(res[name]["fwd"])[1]
    print(f"{name}: bwd {b:.3f} ms ({2.5 * flops / b / 1e9:.0f} TF)  fwd {f:.3f} ms   rounds bwd {['%.3f' % x for x in res[name]['bwd']]}")
r = sorted(res["192x128"]["bwd"])[1] / sorted(res["128x128"]["bwd"])[1]
print(f"bwd 192x128 / 128x128 = {r:.3f}; fwd {sorted(res['192x128']['fwd'])[1] / sorted(res['128x128']['fwd'])[1]:.3f}")
