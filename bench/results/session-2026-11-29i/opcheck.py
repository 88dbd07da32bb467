"""Head dim 256 block-sparse forward: AttentionPlan.run against fragmask.attention on a mask
left on the GPU and one read back, alternating, each call timed alone and back to back
(10 calls between two events). usage: opcheck.py"""
import torch, fragmask
dev = torch.device("cuda"); S, H, d = 16384, 16, 256
gen = torch.Generator(device=dev).manual_seed(0)
keep = torch.rand(S // 128, S // 128, device=dev, generator=gen) < 0.1
dm = (keep.repeat_interleave(128, 0).repeat_interleave(128, 1) & (torch.rand(S, S, device=dev, generator=gen) < 0.5)).contiguous()
q = torch.randn(1, H, S, d, device=dev, dtype=torch.bfloat16); k = torch.randn_like(q); v = torch.randn_like(q)
def timed(fn, n):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); a.record()
    for _ in range(n): fn()
    b.record(); b.synchronize(); return a.elapsed_time(b) / n
for block in ((128, 80), (128, 128)):
    for how in ("device", "read back"):
        m = fragmask.Mask.from_dense(dm, block=block)
        if how == "read back": m.to("cpu")
        m = m.to(dev)
        plan = fragmask.AttentionPlan(q, k, v, m)
        fns = {"plan.run": lambda: plan.run(q, k, v), "attention": lambda: fragmask.attention(q, k, v, m)}
        for f in fns.values():
            for _ in range(5): f()
        r = {name: [] for name in fns}
        for rnd in range(6):
            for name, f in (fns.items() if rnd % 2 == 0 else list(fns.items())[::-1]):
                r[name].append((timed(f, 1), timed(f, 10)))
        cells = []
        for name, v_ in r.items():
            one = sorted(x[0] for x in v_)[3]; ten = sorted(x[1] for x in v_)[3]
            cells.append(f"{name} alone {one:.3f} ms, back to back {ten:.3f} ms")
        print(f"block {block} {how} ({plan.kernel}): " + "; ".join(cells), flush=True)
