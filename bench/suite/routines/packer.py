"""Mask packers: a dense bool mask [S, S] into FragmentNative lists and words.

params: seqlen, mask ("random:0.5" | "blocksparse:0.1" | "topk:8", as in attention.py),
block ("128x128"), where: "gpu" (the mask on the device) or "cpu" (a numpy array).

Systems, gpu: fragmask (``Mask.from_dense`` of a CUDA tensor: the GPU packer on torch's
stream; ``of_roof`` against a device copy with the same traffic, the S² input bytes),
flex (``create_block_mask`` with the tensor as mask_mod: what FlexAttention users build;
synchronized wall time of the second call).
cpu: fragmask (``Mask.from_dense`` of a numpy array: the multithreaded CPU packer, wall
time of one call, median of 5; ``gib_per_s`` of input), on the device machine's CPUs.
"""
import os
import time

from .. import common
from ..common import OK, row, attempt
from .attention import _dense


def run(ctx, p, systems):
    torch = ctx.torch
    import fragmask
    dev = torch.device("cuda")
    s = int(p["seqlen"])
    kind, _, arg = p.get("mask", "random:0.5").partition(":")
    block = tuple(int(x) for x in p.get("block", "128x128").split("x"))
    gen = torch.Generator(device=dev).manual_seed(0)
    dense = _dense(torch, kind, arg, 1, s, s, dev, gen, {})[0].contiguous()
    rows = []
    if p.get("where", "gpu") == "cpu":
        host = dense.cpu().numpy()

        def cpu():
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                fragmask.Mask.from_dense(host, block=block)
                times.append((time.perf_counter() - t0) * 1e3)
            ms = common.median(times)
            return row("fragmask", OK, ms, f"CPU packer, {os.cpu_count()} CPUs, wall time",
                       gib_per_s=s * s / (ms * 1e-3) / 2**30)
        if "fragmask" in systems:
            rows.append(attempt("fragmask", cpu))
        return rows
    roof_ms = common.roof_ms(torch, s * s)  # the dense mask read once

    def gpu():
        fragmask.Mask.from_dense(dense, block=block)
        ms, p10, p90 = common.cuda_ms(torch, lambda: fragmask.Mask.from_dense(dense, block=block),
                                      ctx.warmup, ctx.iters)
        return row("fragmask", OK, ms, "GPU packer, mask already on the device", p10=p10, p90=p90,
                   of_roof=roof_ms / ms, roof_ms=roof_ms)
    if "fragmask" in systems:
        rows.append(attempt("fragmask", gpu))

    def flex():
        from torch.nn.attention.flex_attention import create_block_mask

        def mod(b, h, qi, ki):
            return dense[qi, ki]
        create_block_mask(mod, None, None, s, s, device=dev)
        times = []
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            create_block_mask(mod, None, None, s, s, device=dev)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        ms = common.median(times)
        return row("flex", OK, ms, "create_block_mask, synchronized wall time",
                   of_roof=roof_ms / ms, roof_ms=roof_ms)
    if "flex" in systems:
        rows.append(attempt("flex", flex))
    return rows
