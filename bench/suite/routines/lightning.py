"""Lightning-attention decode (MiniMax-01): ``kv <- exp(-slope)·kv + kᵀv; o = q·kv``.

params: batch, heads (64), dim (96, D = E), tokens (1), rotate_mb (256: state sets rotated
so the state is read from HBM, not L2).

Systems: fragmask (``fragmask.lightning_decode``), torch_compile (torch.compile of the
write-up's code), torch (the write-up's code, eager). Roof: a device copy of the state's
bytes (read once, written once) in the same run; ``of_roof`` = roof ms / ms.
"""
from .. import common
from ..common import OK, row, attempt


def naive(torch):
    def lightning_attention_decode_naive(q, k, v, past_kv, slope):
        """The write-up's reference code (003, section 0x1)."""
        original_dtype = q.dtype
        ratio = torch.exp(-slope)
        kv = past_kv
        n = q.shape[2]
        output = []
        for i in range(n):
            kv = ratio * kv.to(torch.float32) + torch.einsum(
                "... n d, ... n e -> ... d e", k[:, :, i:i + 1], v[:, :, i:i + 1])
            qkv = torch.einsum("... n e, ... e d -> ... n d",
                               q[:, :, i:i + 1].to(torch.float32), kv.to(torch.float32))
            output.append(qkv)
        return torch.concat(output, dim=-2).to(original_dtype), kv
    return lightning_attention_decode_naive


def run(ctx, p, systems):
    torch = ctx.torch
    import fragmask
    b, h = int(p.get("batch", 1)), int(p.get("heads", 64))
    d, n = int(p.get("dim", 96)), int(p.get("tokens", 1))
    state_bytes = b * h * d * d * 4
    sets_n = max(1, min(256, -(-int(p.get("rotate_mb", 256)) * (1 << 20) // state_bytes)))
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = []
    for _ in range(sets_n):
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        kv = torch.randn(b, h, d, d, device="cuda", dtype=torch.float32, generator=gen) * 0.01
        slope = torch.rand(h, device="cuda", generator=gen)
        sets.append((q, k, v, kv, slope))
    roof_ms = common.roof_ms(torch, 2 * state_bytes)  # the state read and written once
    rows = []
    it = {"i": 0}

    def rotating(fn):
        def step():
            s = sets[it["i"] % sets_n]
            it["i"] += 1
            fn(*s)
        return step

    def timed(system, fn, note=""):
        ms, p10, p90 = common.cuda_ms(torch, rotating(fn), max(ctx.warmup, 3),
                                      ctx.iters, inner=sets_n)
        return row(system, OK, ms, note, p10=p10, p90=p90, of_roof=roof_ms / ms, roof_ms=roof_ms,
                   state_sets=sets_n)

    if "fragmask" in systems:
        rows.append(attempt("fragmask", lambda: timed(
            "fragmask", lambda q, k, v, kv, s: fragmask.lightning_decode(q, k, v, kv, s))))
    ref = naive(torch)
    if "torch_compile" in systems:
        def tc():
            comp = torch.compile(ref, dynamic=False)
            return timed("torch_compile", lambda q, k, v, kv, s: comp(q, k, v, kv, s[:, None, None]),
                         "torch.compile of the write-up's code (includes Python dispatch)")
        rows.append(attempt("torch_compile", tc))
    if "torch" in systems:
        rows.append(attempt("torch", lambda: timed(
            "torch", lambda q, k, v, kv, s: ref(q, k, v, kv, s[:, None, None]), "eager")))
    return rows
