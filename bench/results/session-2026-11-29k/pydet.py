"""The deterministic backward through Python on a mask packed on the GPU (its lists built
there: ascending walks, 8 planes per section) against the same mask after mask.to("cpu")
(host lists: the walk orders, 4 planes at S=16384). Block-sparse 10% x 50%, S=16384, H=16,
D=128, as the suite's bwd.s16384.blocksparse10.det row. Run from the repo root."""
import math, sys
sys.path.insert(0, "bench")
import torch, fragmask
from suite import common

S, H, D = 16384, 16, 128
dev = "cuda"
gen = torch.Generator(device=dev).manual_seed(0)
n = S // 128
keep = torch.rand(n, n, device=dev, generator=gen) < 0.1
inside = torch.rand(S, S, device=dev, generator=gen) < 0.5
dm = (keep.repeat_interleave(128, 0).repeat_interleave(128, 1) & inside)[None].contiguous()
del inside
q, k, v = (torch.randn(1, H, S, D, device=dev, dtype=torch.bfloat16, generator=gen).requires_grad_() for _ in range(3))
g = torch.randn(1, H, S, D, device=dev, dtype=torch.bfloat16, generator=gen)

def run(mask, label):
    out = fragmask.attention(q, k, v, mask, deterministic=True)
    grad = lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
    first = grad()
    ms = common.cuda_ms(torch, grad, 5, 20)[0]
    again = grad()
    same = all(torch.equal(a, b) for a, b in zip(first, again))
    print(f"{label:28s} backward {ms:.4f} ms  bit-identical rerun {same}", flush=True)
    return ms, first

rounds = []
for r in range(2):
    gpu_mask = fragmask.Mask.from_dense(dm, transposed=True)
    a, ga = run(gpu_mask, f"round {r} GPU-packed")
    host_mask = fragmask.Mask.from_dense(dm, transposed=True).to("cpu")
    b, gb = run(host_mask, f"round {r} after to('cpu')")
    err = max((x.float() - y.float()).abs().max().item() for x, y in zip(ga, gb))
    print(f"round {r}: to('cpu') over GPU-packed {b / a:.3f}; max |diff| of the gradients {err:.3g}", flush=True)
