"""Attention forward and backward (and the split-KV forward: a short Sq over long Sk).

params: batch (1), heads (16), heads_kv (= heads), seqlen or seqlen_q/seqlen_k, dim (128),
dtype ("bf16"), backward (false), deterministic (false: a backward row whose gradients are
bit-identical run to run; see ``deterministic_refusal`` for which systems run it), block
(the fragmask tile of a packed mask; default: the head dim's tile, which the CLI also packs
at: ``Mask.from_*(head_dim=)``), mask, one of:
  none | causal | window:L (causal, L keys back) | random:P (tokens kept with prob. P)
  | blocksparse:P (P of 128x128 tiles kept, half the tokens inside) | topk:F (k = S/F keys
  per query) | docs:N (N causal documents, random boundaries)
  | blocks64:P[:variable][:paired] (VSA: each 64-token query block of each head keeps a
    random P of the 64-token key blocks; with "variable", key blocks hold 48-64 tokens;
    with "paired", query blocks 2i and 2i+1 keep the same key blocks, as neighbouring
    cubes of a video layout select similar keys: the regime of fragmask's shared-K/V tile)

Systems: fragmask (``fragmask.attention``, masks packed by the GPU packer, or by the CPU
packers for documents and block lists), sdpa, flex, flex_fa4, fa4, fa4_varlen (peers.py).
Backward rows time ``torch.autograd.grad`` of a retained forward (dQ, dK, dV only).
"""
import math

from .. import common, peers as peer_mod
from ..common import OK, UNSUPPORTED, MISSING, FAILED, row, attempt

STRUCTURED = ("none", "causal", "window", "docs")

# What a ``deterministic = true`` row asks of each system: fragmask's own switch
# (``fragmask.attention(deterministic=True)``, the CLI's ``--deterministic``) and
# FlashAttention-4's ``deterministic=`` keyword (its interface's functions, where this
# version has it). The other peers are not measured: this routine sets no deterministic
# mode for them, and nothing established that their backward is deterministic as it is.
DETERMINISTIC_NOT_SET = {
    "sdpa": "SDPA: no deterministic switch set by this routine (its backends are not "
            "established to be deterministic here); not measured",
    "flex": "FlexAttention: no deterministic switch set by this routine; not measured",
    "flex_fa4": "FlexAttention (FA4 backend): no deterministic switch set by this routine; "
                "not measured",
}


def deterministic_refusal(system, backward):
    """Why ``system`` does not run a ``deterministic = true`` row (an UNSUPPORTED row's
    note), or None where it runs it (fragmask, fragmask_cli, fa4 and fa4_varlen, whose
    rows may still refuse at run time: FA4 without the keyword or on a device its
    deterministic backward does not take)."""
    if not backward:
        return "deterministic = true applies to backward rows (the forward has no such mode)"
    if system in ("fragmask", "fragmask_cli", "fa4", "fa4_varlen"):
        return None
    return DETERMINISTIC_NOT_SET.get(system, f"{system}: no deterministic mode in this routine")


def _fa4_deterministic(system, fn, kw):
    """Adds ``deterministic=True`` to FlashAttention-4's keywords ``kw`` of ``fn`` (checked
    on its signature at run time); returns None, or the UNSUPPORTED row where this
    version's ``fn`` has no such parameter."""
    import inspect
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    if "deterministic" not in params:
        return row(system, UNSUPPORTED, note=f"this FlashAttention-4's {fn.__name__} has no "
                                             "deterministic parameter")
    kw["deterministic"] = True
    return None


def _fa4_refused(system, e):
    """An UNSUPPORTED row where FlashAttention-4 refused its deterministic backward (an
    error naming it: the interface read when this was written asserts that it runs on
    SM100/SM110 only, so an H100 or H200 refuses), else None."""
    msg = f"{type(e).__name__}: {e}".replace("\n", " ")
    if "deterministic" not in msg.lower():
        return None
    return row(system, UNSUPPORTED, note=f"FlashAttention-4 refuses deterministic=True ({msg})"[:300])


def _spec(mask):
    kind, _, arg = mask.partition(":")
    return kind, arg


def shape_of(p):
    """(batch, heads, heads_kv, seqlen_q, seqlen_k, dim) of a workload's params."""
    b, h = int(p.get("batch", 1)), int(p.get("heads", 16))
    sq = int(p.get("seqlen_q", p.get("seqlen", 4096)))
    sk = int(p.get("seqlen_k", p.get("seqlen", 4096)))
    return b, h, int(p.get("heads_kv", h)), sq, sk, int(p.get("dim", 128))


def needs_host_inputs(kind):
    """Whether a mask kind draws host-side inputs (``host_inputs``: torch on the CPU)."""
    return kind in ("docs", "blocks64")


def host_inputs(torch, p, kind, arg):
    """The mask's host-side draws (CPU generator seeded with params.seed): ``doc_ids`` and
    ``bounds`` of documents, ``blocks`` (index, num, sizes) of 64-token block lists."""
    _, h, _, sq, sk, _ = shape_of(p)
    cgen = torch.Generator().manual_seed(int(p.get("seed", 0)))
    extra = {}
    if kind == "docs":
        extra["doc_ids"], extra["bounds"] = _doc_ids(torch, sk, int(arg), cgen)
    if kind == "blocks64":
        parts = arg.split(":")
        extra["blocks"] = _blocks64(torch, h, sq, sk, float(parts[0]), "variable" in parts[1:], cgen,
                                    paired="paired" in parts[1:])
    return extra


def _doc_ids(torch, s, n, gen):
    cuts = sorted(torch.randperm(s - 1, generator=gen)[: n - 1].add(1).tolist())
    bounds = [0] + cuts + [s]
    ids = torch.empty(s, dtype=torch.int32)
    for i in range(n):
        ids[bounds[i]:bounds[i + 1]] = i
    return ids, bounds


def _fm_tile(fragmask, block, head_dim, backward):
    """The tile keywords of a fragmask mask: the workload's ``block``, else for a forward
    the head dim's tile (``head_dim=``, the forward kernel's and the CLI's), else the
    constructors' default 128x128 (a backward row, whose kernels are checked on 128x128
    and 64x64 mask tiles, or a wheel from before ``head_dim=``: no ``head_dim_tile``)."""
    if block is not None:
        return {"block": block}
    if not backward and hasattr(fragmask._fragmask, "head_dim_tile"):
        return {"head_dim": head_dim}
    return {}


def _blocks64(torch, heads, sq, sk, frac, variable, gen, paired=False):
    qb, kb = math.ceil(sq / 64), math.ceil(sk / 64)
    k = max(1, round(frac * kb))
    scores = torch.rand(heads, qb, kb, generator=gen)
    if paired:
        # Query block 2i + 1 ranks the key blocks as block 2i does.
        scores = scores[:, 0::2].repeat_interleave(2, 1)[:, :qb]
    index = scores.topk(k, dim=-1).indices.sort(dim=-1).values.to(torch.int32)
    num = torch.full((heads, qb), k, dtype=torch.int32)
    sizes = torch.randint(48, 65, (kb,), generator=gen, dtype=torch.int32) if variable else None
    return index, num, sizes


def _flex_blocks64(torch, blocks, heads, sq, sk, dev, backward):
    """FlexAttention's BlockMask of VSA's lists, straight from them (evaluating a
    mask_mod over H×N×N would not fit): the forward on 64-token blocks (listed blocks full,
    or partial with a mask_mod when blocks hold 48-64 tokens); the backward on 128-token
    blocks with a mask_mod (Flex's 64-token backward does not compile). Returns (mask,
    build ms)."""
    import time

    from torch.nn.attention.flex_attention import BlockMask
    index, num, sizes = blocks
    qb, kb = index.shape[1], math.ceil(sk / 64)
    t0 = time.perf_counter()
    keep = torch.zeros(heads, qb, kb, dtype=torch.bool)
    keep.scatter_(2, index.long(), True)
    keep = keep.to(dev)
    tok = (sizes if sizes is not None else torch.full((kb,), 64, dtype=torch.int32)).to(dev)

    def mod(bb, hh, qi, ki):
        return keep[hh, qi // 64, ki // 64] & (ki % 64 < tok[ki // 64])
    if not backward:
        lists = torch.zeros(1, heads, qb, kb, dtype=torch.int32, device=dev)
        lists[..., :index.shape[-1]] = index.to(dev)[None]
        counts = num.to(dev)[None].contiguous()
        if sizes is None:
            zeros = torch.zeros_like(counts)
            bm = BlockMask.from_kv_blocks(zeros, lists, counts, lists, BLOCK_SIZE=64, seq_lengths=(sq, sk))
        else:
            bm = BlockMask.from_kv_blocks(counts, lists, BLOCK_SIZE=64, mask_mod=mod, seq_lengths=(sq, sk))
    else:
        q2, k2 = math.ceil(qb / 2), math.ceil(kb / 2)
        pad = torch.zeros(heads, q2 * 2, k2 * 2, dtype=torch.bool, device=dev)
        pad[:, :qb, :kb] = keep
        keep128 = pad.reshape(heads, q2, 2, k2, 2).any(dim=4).any(dim=2)
        counts = keep128.sum(-1).to(torch.int32)[None]
        lists = torch.argsort((~keep128).to(torch.int8), dim=-1, stable=True).to(torch.int32)[None]
        bm = BlockMask.from_kv_blocks(counts.contiguous(), lists.contiguous(), BLOCK_SIZE=128, mask_mod=mod,
                                      seq_lengths=(sq, sk))
    torch.cuda.synchronize()
    return bm, (time.perf_counter() - t0) * 1e3


def _dense(torch, kind, arg, heads, sq, sk, dev, gen, extra):
    """The mask as a dense bool tensor [Hm, Sq, Sk] on the device (Hm = 1 or heads)."""
    qi = torch.arange(sq, device=dev)[:, None] + (sk - sq)  # bottom-right aligned
    ki = torch.arange(sk, device=dev)[None, :]
    if kind == "causal":
        return (qi >= ki)[None]
    if kind == "window":
        return ((qi >= ki) & (qi - ki <= int(arg)))[None]
    if kind == "docs":
        ids = extra["doc_ids"].to(dev)
        return ((ids[:, None] == ids[None, :]) & (qi >= ki))[None]
    if kind == "random":
        return (torch.rand(sq, sk, device=dev, generator=gen) < float(arg))[None]
    if kind == "blocksparse":
        nq, nk = math.ceil(sq / 128), math.ceil(sk / 128)
        keep = torch.rand(nq, nk, device=dev, generator=gen) < float(arg)
        inside = torch.rand(sq, sk, device=dev, generator=gen) < 0.5
        return (keep.repeat_interleave(128, 0)[:sq].repeat_interleave(128, 1)[:, :sk] & inside)[None]
    if kind == "topk":
        k = max(1, sk // int(arg))
        idx = torch.rand(sq, sk, device=dev, generator=gen).topk(k, dim=1).indices
        m = torch.zeros(sq, sk, dtype=torch.bool, device=dev)
        m.scatter_(1, idx, True)
        return m[None]
    if kind == "blocks64":
        index, num, sizes = extra["blocks"]
        qb, kb = index.shape[1], math.ceil(sk / 64)
        keep = torch.zeros(heads, qb, kb, dtype=torch.bool)
        keep.scatter_(2, index.long(), True)
        tok = torch.ones(kb, 64, dtype=torch.bool)
        if sizes is not None:
            tok = torch.arange(64)[None, :] < sizes[:, None]
        keep = keep.to(dev)
        m = keep.repeat_interleave(64, 1)[:, :sq]
        m = m[:, :, :, None] & tok.to(dev)[None, None]
        return m.reshape(heads, sq, kb * 64)[:, :, :sk]
    raise ValueError(f"unknown mask kind {kind!r}")


def run(ctx, p, systems):
    torch, F = ctx.torch, ctx.torch.nn.functional
    dev = torch.device("cuda")
    b, h, hkv, sq, sk, d = shape_of(p)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[p.get("dtype", "bf16")]
    backward = bool(p.get("backward", False))
    deterministic = bool(p.get("deterministic", False))
    block = tuple(int(x) for x in p["block"].split("x")) if "block" in p else None
    kind, arg = _spec(p.get("mask", "none"))
    gen = torch.Generator(device=dev).manual_seed(int(p.get("seed", 0)))
    warm, iters = ctx.warmup, ctx.iters

    q = torch.randn(b, h, sq, d, device=dev, dtype=dtype, generator=gen)
    k = torch.randn(b, hkv, sk, d, device=dev, dtype=dtype, generator=gen)
    v = torch.randn(b, hkv, sk, d, device=dev, dtype=dtype, generator=gen)
    do = torch.randn_like(q) if backward else None
    flops = common.attention_flops(b, h, sq, sk, d, backward)
    extra = host_inputs(torch, p, kind, arg)
    lazy = {}

    def get_dense():
        """The dense bool mask, built on first use (not at all for block lists at full N)."""
        if "d" not in lazy:
            lazy["d"] = None if kind == "none" else _dense(torch, kind, arg, h, sq, sk, dev, gen, extra)
        return lazy["d"]
    if kind not in ("none", "blocks64"):
        get_dense()
    dense_bytes = 0 if kind == "none" else b * (h if kind == "blocks64" else 1) * sq * sk
    left = int(arg) if kind == "window" else -1
    window = (left, 0) if kind == "window" else None
    causal = kind in ("causal", "window")

    # Copies of q, k, v cycled through (params.rotate_mb), so a short call reads its K/V
    # from DRAM rather than from L2 where the previous call left it.
    sets = common.rotation(2 * k.numel() * k.element_size(), int(p["rotate_mb"])) if p.get("rotate_mb") else 1
    inputs = [(q, k, v)] + [tuple(t.clone() for t in (q, k, v)) for _ in range(sets - 1)]

    def timed(system, fn, note="", **more):
        """Times ``fn`` (a forward, over the rotating inputs) or the backward of its output."""
        if backward:
            qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
            out = fn(qq, kk, vv)
            out = out[0] if isinstance(out, tuple) else out

            def step():
                torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)
        else:
            it = [0]

            def step():
                fn(*inputs[it[0] % sets])
                it[0] += 1
        inner = 1 if backward else sets
        ms, p10, p90 = common.cuda_ms(torch, step, max(warm, inner), iters, inner=inner)
        if sets > 1:
            more["input_sets"] = sets
        return row(system, OK, ms, note, p10=p10, p90=p90, tflops=common.tflops(flops, ms), **more)

    runners = {}
    ref = {}

    # fragmask ------------------------------------------------------------------------
    def fm():
        import fragmask
        build_ms = None
        mask = None
        tile = _fm_tile(fragmask, block, d, backward)
        if kind in ("random", "blocksparse", "topk"):
            dm = get_dense()[0].contiguous()
            build_ms = common.cuda_ms(
                torch, lambda: fragmask.Mask.from_dense(dm, transposed=backward, **tile),
                2, 10)[0]
            mask = fragmask.Mask.from_dense(dm, transposed=backward, **tile)
        elif kind == "docs":
            mask = fragmask.Mask.from_predicate("causal", sk, doc_ids=extra["doc_ids"].numpy(),
                                                **tile)
        elif kind == "blocks64":
            index, num, sizes = extra["blocks"]
            mask = fragmask.Mask.from_blocks(index.numpy(), num.numpy(),
                                             None if sizes is None else sizes.numpy(),
                                             block_size=64, seqlen_q=sq, seqlen_k=sk,
                                             block=(64, 64), warpgroups=1)
        if mask is not None and backward and not mask.has_transposed:
            mask = mask.with_transposed()
        if mask is not None:
            mask = mask.to(dev)

        # Only a deterministic row passes the keyword (a wheel from before it runs the rest).
        det = {"deterministic": True} if deterministic else {}

        def f(qq, kk, vv):
            return fragmask.attention(qq, kk, vv, mask, causal=causal, window=window, **det)
        if not backward:
            ref["fragmask"] = f(q, k, v)
        r = timed("fragmask", f, "deterministic=True" if deterministic else "",
                  build_ms=build_ms)
        return r
    runners["fragmask"] = lambda: attempt("fragmask", fm)

    # fragmask's binary: kernel time from `fragmask bench attention|backward --json` ---------
    runners["fragmask_cli"] = lambda: attempt("fragmask_cli", lambda: cli(ctx, p, extra, flops))

    # SDPA ------------------------------------------------------------------------------
    def sdpa():
        gqa = hkv != h
        if kind == "none":
            def f(qq, kk, vv):
                return F.scaled_dot_product_attention(qq, kk, vv, enable_gqa=gqa)
            note = "no mask"
        elif kind == "causal" and sq == sk:
            def f(qq, kk, vv):
                return F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=gqa)
            note = "is_causal"
        else:
            if dense_bytes > (1 << 31):
                return row("sdpa", UNSUPPORTED, note="its dense bool mask would exceed 2 GiB")
            am = get_dense()[None]

            def f(qq, kk, vv):
                return F.scaled_dot_product_attention(qq, kk, vv, attn_mask=am, enable_gqa=gqa)
            note = "dense bool mask"
        if not backward:
            ref["sdpa"] = f(q, k, v)
        return timed("sdpa", f, note)
    runners["sdpa"] = lambda: attempt("sdpa", sdpa)

    # FlexAttention (Triton and FA4 backends) ----------------------------------------------
    bm_cache = {}

    def block_mask():
        if "bm" in bm_cache:
            return bm_cache["bm"]
        from torch.nn.attention.flex_attention import create_block_mask
        off = sk - sq
        if kind == "none":
            bm_cache["bm"], bm_cache["build"] = None, None
            return None
        if kind == "causal":
            def mod(bb, hh, qi, ki):
                return qi + off >= ki
        elif kind == "window":
            def mod(bb, hh, qi, ki):
                return (qi + off >= ki) & (qi + off - ki <= left)
        elif kind == "docs":
            ids = extra["doc_ids"].to(dev)

            def mod(bb, hh, qi, ki):
                return (ids[qi] == ids[ki]) & (qi >= ki)
        elif kind == "blocks64":
            bm_cache["bm"], bm_cache["build"] = _flex_blocks64(torch, extra["blocks"], h, sq, sk, dev, backward)
            return bm_cache["bm"]
        else:
            buf = get_dense()

            def mod(bb, hh, qi, ki):
                return buf[0, qi, ki]
        create_block_mask(mod, None, None, sq, sk, device=dev)
        torch.cuda.synchronize()
        import time
        t0 = time.perf_counter()
        bm = create_block_mask(mod, None, None, sq, sk, device=dev)
        torch.cuda.synchronize()
        bm_cache["bm"], bm_cache["build"] = bm, (time.perf_counter() - t0) * 1e3
        return bm

    def flex(system, backend):
        def go():
            call, why = peer_mod.flex(backend)
            if call is None:
                return row(system, MISSING, note=why)
            bm = block_mask()

            # 64-token block lists need 64-row, 64-column kernel blocks (Triton backend).
            opts = {"BLOCK_M": 64, "BLOCK_N": 64} if bm is not None and bm.BLOCK_SIZE[0] == 64 and backend == "triton" else None

            def f(qq, kk, vv):
                return call(qq, kk, vv, block_mask=bm, enable_gqa=hkv != h, kernel_options=opts)
            if not backward:
                ref[system] = f(q, k, v)
            note = f"create_block_mask, {bm.BLOCK_SIZE[0]}-token blocks" if bm is not None else ""
            return timed(system, f, note,
                         build_ms=bm_cache.get("build"))
        return attempt(system, go)
    runners["flex"] = lambda: flex("flex", "triton")
    runners["flex_fa4"] = lambda: flex("flex_fa4", "fa4")

    # FlashAttention-4 direct and varlen -----------------------------------------------------
    def fa4_direct():
        mod, why = peer_mod.fa4()
        if mod is None:
            return row("fa4", MISSING, note=why)
        if kind not in ("none", "causal", "window"):
            return row("fa4", UNSUPPORTED, note=f"flash_attn_func has no {kind} mask (use fa4_varlen or mask_mod)")
        from flash_attn.cute import flash_attn_func
        kw = {"causal": causal}
        if window is not None:
            kw["window_size"] = (left, 0)
        if deterministic:
            refused = _fa4_deterministic("fa4", flash_attn_func, kw)
            if refused is not None:
                return refused

        def f(qq, kk, vv):
            o = flash_attn_func(qq.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), **kw)
            o = o[0] if isinstance(o, tuple) else o
            return o.transpose(1, 2)
        # Pre-transposed inputs for the timing: FA4's own [B, S, H, D] layout, no copies.
        bshd = {s_[0].data_ptr(): tuple(t.transpose(1, 2).contiguous() for t in s_) for s_ in inputs}
        if not backward:
            ref["fa4"] = f(q, k, v)

            def g(qq, _k, _v):
                return flash_attn_func(*bshd[qq.data_ptr()], **kw)
            return timed("fa4", g, "[B, S, H, D]")
        note = "[B, S, H, D] views of the [B, H, S, D] leaves"
        if not deterministic:
            return timed("fa4", f, note)
        try:
            return timed("fa4", f, note + ", deterministic=True")
        except Exception as e:  # FA4's refusal of the mode is a refusal, not a failure
            refused = _fa4_refused("fa4", e)
            if refused is None:
                raise
            return refused
    runners["fa4"] = lambda: attempt("fa4", fa4_direct)

    def fa4_varlen():
        mod, why = peer_mod.fa4()
        if mod is None:
            return row("fa4_varlen", MISSING, note=why)
        if kind != "docs" or b != 1 or sq != sk:
            return row("fa4_varlen", UNSUPPORTED, note="varlen runs causal documents only")
        from flash_attn.cute import flash_attn_varlen_func
        bounds = extra["bounds"]
        cu = torch.tensor(bounds, dtype=torch.int32, device=dev)
        mx = max(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1))
        kw = {}
        if deterministic:
            refused = _fa4_deterministic("fa4_varlen", flash_attn_varlen_func, kw)
            if refused is not None:
                return refused

        def f(qq, kk, vv):
            o = flash_attn_varlen_func(qq[0].transpose(0, 1), kk[0].transpose(0, 1),
                                       vv[0].transpose(0, 1), cu_seqlens_q=cu, cu_seqlens_k=cu,
                                       max_seqlen_q=mx, max_seqlen_k=mx, causal=True, **kw)
            o = o[0] if isinstance(o, tuple) else o
            return o.transpose(0, 1)[None]
        if not backward:
            ref["fa4_varlen"] = f(q, k, v)
        note = "cu_seqlens (includes the [S, H, D] transposes)"
        if not deterministic:
            return timed("fa4_varlen", f, note)
        try:
            return timed("fa4_varlen", f, note + ", deterministic=True")
        except Exception as e:
            refused = _fa4_refused("fa4_varlen", e)
            if refused is None:
                raise
            return refused
    runners["fa4_varlen"] = lambda: attempt("fa4_varlen", fa4_varlen)

    # The systems run in the order of `systems` (run.py reverses it on alternate repeats, so
    # no system always runs first on a cool GPU); the rows keep the routine's order.
    def dispatch(s):
        why = deterministic_refusal(s, backward) if deterministic else None
        return row(s, UNSUPPORTED, note=why) if why else runners[s]()
    ran = {s: dispatch(s) for s in systems if s in runners}
    out_rows = [ran[s] for s in runners if s in ran]

    # Agreement of each output with SDPA's (rows with a visible key) ---------------------------
    base = ref.get("sdpa")
    if base is not None:
        good = torch.isfinite(base.float()).all(dim=-1)
        if lazy.get("d") is not None:
            good &= lazy["d"].any(dim=-1)[None].expand_as(good)
        for r in out_rows:
            o = ref.get(r["system"])
            if o is not None and r["system"] != "sdpa" and o.shape == base.shape:
                diff = (o.float() - base.float())[good]
                r["rel_err_vs_sdpa"] = float(diff.norm() / base.float()[good].norm().clamp_min(1e-30))
    density = None
    if lazy.get("d") is not None:
        density = float(lazy["d"].float().mean())
    elif kind == "blocks64":
        index, num, sizes = extra["blocks"]
        density = float(num.float().mean()) / math.ceil(sk / 64)
    for r in out_rows:
        r["density"] = density
    return out_rows


class CliUnsupported(Exception):
    """The CLI cannot run this workload (the reason is the message)."""


def cli(ctx, p, extra, flops):
    """The same workload through ``fragmask bench attention`` (or ``bench backward``) of
    ``--bin``: the kernel time alone (CUDA events around launches, as the CLI times them),
    on the binary's own random inputs and synthetic masks (same kinds, other draws). This is
    what an A/B against a build without the Python package compares."""
    import os
    import tempfile
    if not ctx.bin or not os.path.exists(ctx.bin):
        return row("fragmask_cli", MISSING, note=f"no fragmask binary (--bin {ctx.bin!r})")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            cmd = cli_command(ctx.bin, p, extra, ctx.warmup, ctx.iters, tmp)
        except CliUnsupported as e:
            return row("fragmask_cli", UNSUPPORTED, note=str(e))
        try:
            out = run_cli(cmd)
        except CliFailed as e:
            return row("fragmask_cli", FAILED, note=str(e))
    ms = out.get("ms_median")
    return row("fragmask_cli", OK if ms else FAILED, ms, "kernel time, `fragmask bench`, synthetic draws",
               tflops=common.tflops(flops, ms), kernel=out.get("kernel"))


def cli_command(binary, p, extra, warmup, iters, tmp):
    """The ``BINARY bench attention|backward --random ... --json`` command (a list) of a
    workload's params; a mask the CLI reads from a file (documents, block lists) is packed
    into ``tmp`` by ``BINARY pack`` first, so the command is valid while ``tmp`` exists.
    ``extra``: ``host_inputs`` of the workload. Raises CliUnsupported."""
    import os
    import subprocess
    if p.get("dtype", "bf16") != "bf16":
        raise CliUnsupported("the CLI's --random inputs are bf16")
    kind, arg = _spec(p.get("mask", "none"))
    backward = bool(p.get("backward", False))
    deterministic = bool(p.get("deterministic", False))
    if deterministic and not backward:
        raise CliUnsupported("--deterministic needs a backward workload (`bench backward`)")
    b, h, hkv, sq, sk, d = shape_of(p)
    offset = ["--diag-offset", str(sk - sq)] if sk != sq and kind in ("causal", "window") else []

    def pack(args):
        f = os.path.join(tmp, "mask.safetensors")
        cmd = [binary, "pack"] + args + (["--transposed"] if backward else []) + ["-o", f, "-q"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"fragmask pack: {(res.stderr or res.stdout).strip()[-300:]}")
        return ["--mask", f]
    if kind == "none":
        flags = []
    elif kind == "causal":
        flags = ["--causal"] + offset
    elif kind == "window":
        flags = ["--window", f"{int(arg)},0"] + offset
    elif kind == "random":
        flags = ["--synthetic-mask", f"random:{arg}"]
    elif kind == "blocksparse":
        flags = ["--synthetic-mask", f"blocksparse:{arg}:0.5"]
    elif kind == "topk":
        # the workload's topk:F keeps k = S/F keys; the CLI's topk:FRACTION keeps FRACTION of them
        flags = ["--synthetic-mask", f"topk:{1.0 / float(arg)!r}"]
    elif kind == "docs":
        import numpy as np
        ids = os.path.join(tmp, "ids.npy")
        np.save(ids, extra["doc_ids"].numpy().astype(np.int32))
        flags = pack(["--predicate", f"causal,doc={ids}", "--seqlen-q", str(sq), "--seqlen-k", str(sk)])
    elif kind == "blocks64":
        import numpy as np
        index, num, sizes = extra["blocks"]
        fi, fn = os.path.join(tmp, "idx.npy"), os.path.join(tmp, "num.npy")
        np.save(fi, index.numpy())
        np.save(fn, num.numpy())
        more = []
        if sizes is not None:
            fs = os.path.join(tmp, "sizes.npy")
            np.save(fs, sizes.numpy())
            more = ["--block-sizes", fs]
        flags = pack(["--blocks", fi, "--blocks-num", fn, "--seqlen-q", str(sq), "--seqlen-k", str(sk),
                      "--block", "64x64", "--warpgroups", "1"] + more)
    else:
        raise CliUnsupported(f"no CLI flag for {kind}")
    timed_warmup = ["--warmup-ms", str(int(common.WARMUP_MS))] if common.WARMUP_MS else []
    # A workload's named tile is the Python column's (``_fm_tile``): the CLI runs it too, so
    # both columns time one kernel (a packed mask file carries its own).
    if "block" in p and kind in ("none", "causal", "window", "random", "blocksparse", "topk"):
        flags = flags + ["--block", str(p["block"])]
    return [binary, "bench", "backward" if backward else "attention", "--random",
            f"{b},{h},{hkv},{sq},{sk},{d}", "--json", "--warmup", str(max(warmup, 5)),
            "--iters", str(max(iters, 20))] + timed_warmup + flags + (
        ["--deterministic"] if deterministic else [])


class CliFailed(Exception):
    """A ``fragmask bench`` call exited non-zero (the message: its status and output tail)."""


def run_cli(cmd, timeout=600):
    """Runs a ``cli_command``; returns the JSON of its output's last line (``ms_median``,
    ``kernel``). Raises CliFailed."""
    import json
    import subprocess
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().replace("\n", " ")[-300:]
        raise CliFailed(f"rc {res.returncode}: {msg}")
    return json.loads(res.stdout.strip().splitlines()[-1])
