"""Python per-call overhead: the host time of one eager call at a small shape, where the
GPU work is shorter than the launch path (perf_counter, median of 9 × 200 calls).

params: batch (1), heads (2), seqlen (256), dim (128).

Systems: fragmask (``fragmask.attention``, eager fast path), sdpa, flex (compiled), fa4.
``ms`` is host time per call; ``gpu_ms`` the CUDA-event time per call of 500 back-to-back
calls (what the GPU sees when the host keeps up).
"""
from .. import common, peers as peer_mod
from ..common import OK, MISSING, row, attempt


def run(ctx, p, systems):
    torch, F = ctx.torch, ctx.torch.nn.functional
    import fragmask
    b, h = int(p.get("batch", 1)), int(p.get("heads", 2))
    s, d = int(p.get("seqlen", 256)), int(p.get("dim", 128))
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    rows = []

    def measure(system, fn, note=""):
        us = common.host_us(fn)
        torch.cuda.synchronize()
        gpu = common.cuda_ms(torch, fn, 10, 7, inner=500, head_start=False)[0]
        return row(system, OK, us / 1e3, note, host_us=us, gpu_ms=gpu)

    if "fragmask" in systems:
        rows.append(attempt("fragmask", lambda: measure(
            "fragmask", lambda: fragmask.attention(q, k, v), "eager fast path")))
    if "sdpa" in systems:
        rows.append(attempt("sdpa", lambda: measure(
            "sdpa", lambda: F.scaled_dot_product_attention(q, k, v))))

    def flex():
        call, why = peer_mod.flex("triton")
        if call is None:
            return row("flex", MISSING, note=why)
        return measure("flex", lambda: call(q, k, v), "compiled")
    if "flex" in systems:
        rows.append(attempt("flex", flex))

    def fa4():
        mod, why = peer_mod.fa4()
        if mod is None:
            return row("fa4", MISSING, note=why)
        from flash_attn.cute import flash_attn_func
        qb, kb, vb = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        return measure("fa4", lambda: flash_attn_func(qb, kb, vb))
    if "fa4" in systems:
        rows.append(attempt("fa4", fa4))
    return rows
