"""Split-KV decode: q [B, Sq, H, D] against a KV cache, beside a device copy of the cache's
bytes (the roof: a decode step must read K and V once).

params: batch, heads, heads_kv, seqlen_k, seqlen_q (1), dim (128), dtype ("bf16"),
cache: "contiguous" | "paged" (page_size, shuffled pages) | "mask" (VSA: each of
the H heads' 64-token query block keeps a random ``frac`` of the 64-token key blocks) |
"topk" (``topk`` random keys per request, the same for every query head).

Systems: fragmask (``fragmask.decode``), sdpa (head-major copies of the cache; GQA through
``enable_gqa``; the mask as a dense bool tensor; top-k as a gather then SDPA),
flex / flex_fa4 (FlexAttention's decode path), fa4 (``flash_attn_func`` on the
[B, Sk, Hkv, D] cache, its split heuristic; paged through ``flash_attn_varlen_func``'s
``page_table``).
"""
import math

from .. import common, peers as peer_mod
from ..common import OK, MISSING, UNSUPPORTED, row, attempt


def run(ctx, p, systems):
    torch, F = ctx.torch, ctx.torch.nn.functional
    import fragmask
    dev = torch.device("cuda")
    b, h = int(p.get("batch", 1)), int(p.get("heads", 32))
    hkv = int(p.get("heads_kv", h))
    sk, sq = int(p["seqlen_k"]), int(p.get("seqlen_q", 1))
    d = int(p.get("dim", 128))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[p.get("dtype", "bf16")]
    cache = p.get("cache", "contiguous")
    gen = torch.Generator(device=dev).manual_seed(int(p.get("seed", 0)))
    cgen = torch.Generator().manual_seed(int(p.get("seed", 0)))
    warm, iters = ctx.warmup, ctx.iters

    q = torch.randn(b, sq, h, d, device=dev, dtype=dtype, generator=gen)
    k = torch.randn(b, sk, hkv, d, device=dev, dtype=dtype, generator=gen)
    v = torch.randn(b, sk, hkv, d, device=dev, dtype=dtype, generator=gen)
    elem = k.element_size()
    read_keys = sk
    kw = {}
    dense = None
    if cache == "paged":
        page = int(p.get("page_size", 16))
        pages = math.ceil(sk / page)
        perm = torch.randperm(b * pages, generator=cgen).to(torch.int32)
        table = perm.reshape(b, pages).to(dev)
        kp = torch.empty(b * pages, page, hkv, d, device=dev, dtype=dtype)
        vp = torch.empty_like(kp)
        src_k = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pages * page - sk)).reshape(b * pages, page, hkv, d)
        src_v = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pages * page - sk)).reshape(b * pages, page, hkv, d)
        kp[perm.long().to(dev)] = src_k
        vp[perm.long().to(dev)] = src_v
        kw = dict(block_table=table, seqlens_k=torch.full((b,), sk, dtype=torch.int32, device=dev))
        fk, fv = kp, vp
    else:
        fk, fv = k, v
    if cache == "mask":
        frac = float(p["frac"])
        kb = math.ceil(sk / 64)
        qb = math.ceil(sq / 64)
        n = max(1, round(frac * kb))
        index = torch.rand(h, qb, kb, generator=cgen).topk(n, dim=-1).indices.sort(-1).values.to(torch.int32)
        num = torch.full((h, qb), n, dtype=torch.int32)
        fm_mask = fragmask.Mask.from_blocks(index.numpy(), num.numpy(), block_size=64, seqlen_q=sq,
                                            seqlen_k=sk, block=(64, 64), warpgroups=1).to(dev)
        keep = torch.zeros(h, qb, kb, dtype=torch.bool)
        keep.scatter_(2, index.long(), True)
        dense = keep.to(dev).repeat_interleave(64, 1)[:, :sq].repeat_interleave(64, 2)[:, :, :sk]
        kw = dict(mask=fm_mask)
        read_keys = n * 64
    if cache == "topk":
        kk = int(p["topk"])
        idx = torch.rand(b, sk, device=dev, generator=gen).topk(kk, dim=-1).indices.sort(-1).values.to(torch.int32)
        kw = dict(topk_indices=idx)
        read_keys = kk
    roof = common.roof_ms(torch, 2 * b * read_keys * hkv * d * elem)  # K and V read once
    # Copies of the cache cycled through, so every call reads it from DRAM (as a decode step
    # of a large batch does), not from L2 where the previous call left it.
    sets = common.rotation(fk.numel() * elem * 2, int(p.get("rotate_mb", 256)))
    caches = [(fk, fv)] + [(fk.clone(), fv.clone()) for _ in range(sets - 1)]
    rows = []

    def timed(system, fn, note=""):
        """``fn(k_cache, v_cache)`` timed over the rotating caches."""
        it = [0]

        def step():
            kc, vc = caches[it[0] % sets]
            it[0] += 1
            fn(kc, vc)
        ms, p10, p90 = common.cuda_ms(torch, step, max(warm, sets), iters, inner=sets)
        return row(system, OK, ms, note, p10=p10, p90=p90, of_roof=roof / ms, roof_ms=roof,
                   cache_sets=sets)

    if "fragmask" in systems:
        rows.append(attempt("fragmask", lambda: timed(
            "fragmask", lambda kc, vc: fragmask.decode(q, kc, vc, **kw), f"{cache} cache")))

    qh = q.transpose(1, 2).contiguous()
    lazy = {}
    need_heads = cache in ("contiguous", "mask", "topk")

    def headmajor():
        """Head-major [B, Hkv, Sk, D] copies of every rotated cache, built once."""
        if "hm" not in lazy:
            if cache == "paged":
                raise ValueError("no head-major view of a paged cache")
            lazy["hm"] = [(kc.transpose(1, 2).contiguous(), vc.transpose(1, 2).contiguous())
                          for kc, vc in caches]
        return lazy["hm"]

    def timed_hm(system, fn, note=""):
        """``fn(k_head_major, v_head_major)`` timed over the rotating caches."""
        hm = headmajor()
        it = [0]

        def step():
            kc, vc = hm[it[0] % sets]
            it[0] += 1
            fn(kc, vc)
        ms, p10, p90 = common.cuda_ms(torch, step, max(warm, sets), iters, inner=sets)
        return row(system, OK, ms, note, p10=p10, p90=p90, of_roof=roof / ms, roof_ms=roof,
                   cache_sets=sets)

    def sdpa():
        if not need_heads:
            return row("sdpa", UNSUPPORTED, note="no paged KV cache in SDPA")
        gqa = hkv != h
        if cache == "topk":
            ix = kw["topk_indices"].long()[:, None, :, None].expand(b, hkv, int(p["topk"]), d)

            def f(kh, vh):
                kg = kh.gather(2, ix)
                vg = vh.gather(2, ix)
                return F.scaled_dot_product_attention(qh, kg, vg, enable_gqa=gqa)
            return timed_hm("sdpa", f, "gather of the k keys, then SDPA")
        if cache == "mask":
            am = dense[None]
            return timed_hm("sdpa", lambda kh, vh: F.scaled_dot_product_attention(
                qh, kh, vh, attn_mask=am, enable_gqa=gqa), "dense bool mask")
        return timed_hm("sdpa", lambda kh, vh: F.scaled_dot_product_attention(
            qh, kh, vh, enable_gqa=gqa), "head-major copy of the cache")

    if "sdpa" in systems:
        rows.append(attempt("sdpa", sdpa))

    def flex(system, backend):
        def go():
            call, why = peer_mod.flex(backend)
            if call is None:
                return row(system, MISSING, note=why)
            if cache not in ("contiguous", "mask"):
                return row(system, UNSUPPORTED, note=f"{cache} cache not wired for FlexAttention")
            bm = None
            if cache == "mask":
                from torch.nn.attention.flex_attention import create_block_mask
                buf = dense

                def mod(bb, hh, qi, ki):
                    return buf[hh, qi, ki]
                bm = create_block_mask(mod, None, h, sq, sk, device=dev)
            return timed_hm(system, lambda kh, vh: call(qh, kh, vh, block_mask=bm, enable_gqa=hkv != h))
        return attempt(system, go)
    if "flex" in systems:
        rows.append(flex("flex", "triton"))
    if "flex_fa4" in systems:
        rows.append(flex("flex_fa4", "fa4"))

    def fa4():
        mod, why = peer_mod.fa4()
        if mod is None:
            return row("fa4", MISSING, note=why)
        from flash_attn.cute import flash_attn_func, flash_attn_varlen_func
        if cache == "paged":
            cuq = torch.arange(0, (b + 1) * sq, sq, dtype=torch.int32, device=dev)
            qt = q.reshape(b * sq, h, d)
            return timed("fa4", lambda kc, vc: flash_attn_varlen_func(
                qt, kc, vc, cu_seqlens_q=cuq, max_seqlen_q=sq, seqused_k=kw["seqlens_k"],
                page_table=kw["block_table"], num_splits=0),
                "flash_attn_varlen_func with page_table, split heuristic")
        if cache != "contiguous":
            return row("fa4", UNSUPPORTED, note=f"{cache} cache not wired for flash_attn_func")
        return timed("fa4", lambda kc, vc: flash_attn_func(q, kc, vc, num_splits=0),
                     "[B, Sk, Hkv, D] cache, split heuristic (num_splits=0)")
    if "fa4" in systems:
        rows.append(attempt("fa4", fa4))
    return rows
