"""Host overhead of fragmask's Python calls beside torch's SDPA and FlexAttention, and
the step-level targets of the Python op layer, in one run on one GPU.

Host overhead = time per call in a loop of back-to-back calls on a tiny shape (CUDA
events around the loop) minus the kernel time (the same calls captured in a CUDA graph
and replayed: no host work between kernels). ``host_us`` is the CPU time per call
(perf_counter over a loop short enough never to wait for the GPU). Each measurement is
an importable function (``overhead``, ``step_ms``, ``copy_roof_ms``, ...); ``main``
writes a table and a JSON file.

usage: python3 bench/python_overhead.py [--json out.json] [--quick]
"""
import argparse
import inspect
import json
import time
import traceback

import torch
import torch.nn.functional as F

import fragmask
from fragmask import Mask, _ops
from suite.common import median_of_rounds  # bench/ is this script's folder, on sys.path


def events_ms(fn, n=200, reps=5):
    """Median over reps of the GPU time per call of n back-to-back calls."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / n)
    times.sort()
    return times[len(times) // 2]


def host_us(fn, n=100, reps=7):
    """Median over reps of the CPU time per call of n calls (the GPU kept busy with
    nothing else)."""
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
    torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2]


def graph_ms(fn, n=50):
    """GPU time per call of n calls captured in one CUDA graph and replayed."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    # Captured on the warmed stream (a backward's workspace is per stream).
    with torch.cuda.graph(g, stream=s):
        for _ in range(n):
            fn()
    g.replay()
    torch.cuda.synchronize()
    return events_ms(g.replay, n=3, reps=5) / n


def overhead(fn, graph=True):
    """{eager_us, host_us, graph_us, overhead_us}: per-call times of `fn` and its host
    overhead (eager minus graph replay)."""
    fn()
    torch.cuda.synchronize()
    r = {"eager_us": events_ms(fn) * 1e3, "host_us": host_us(fn)}
    if graph:
        try:
            r["graph_us"] = graph_ms(fn) * 1e3
            r["overhead_us"] = r["eager_us"] - r["graph_us"]
        except Exception as e:  # noqa: BLE001  (reported, not fatal)
            r["graph_error"] = f"{type(e).__name__}: {e}"[:300]
    return r


_COPY_GBPS = []


def copy_gbps():
    """Device-copy bandwidth (GB/s, read + write) of a 1 GiB copy, measured once: the
    memory roof a bandwidth-bound call is compared with (a small copy would measure
    its launch, not the memory)."""
    if not _COPY_GBPS:
        src = torch.empty(1 << 29, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        ms = events_ms(lambda: dst.copy_(src), n=10, reps=5)
        _COPY_GBPS.append(2 * src.numel() / (ms * 1e6))
    return _COPY_GBPS[0]


def copy_roof_ms(nbytes):
    """Time a bandwidth-bound call moving `nbytes` (read + write) takes at the copy roof."""
    return nbytes / (copy_gbps() * 1e6)


def flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    return torch.compile(flex_attention, dynamic=False), create_block_mask


def tiny_inputs(requires_grad=False, B=1, H=2, S=256, D=128):
    g = torch.Generator(device="cuda").manual_seed(0)
    return [torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
            .requires_grad_(requires_grad) for _ in range(3)]


class _Rows(dict):
    """Rows that call ``save`` after each is set (a run cut short keeps them)."""

    def __init__(self, save):
        super().__init__()
        self._save = save

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._save()


def tiny_rows(rows=None, registered=True, flex_rows=True):
    """Host overhead per call of every op on a tiny shape, beside SDPA and Flex (and the
    registered ops', which traced code runs, with ``registered``; Flex's only with
    ``flex_rows``: its compilation takes a while)."""
    rows = {} if rows is None else rows
    q, k, v = tiny_inputs()
    rows["attention no-grad"] = overhead(lambda: fragmask.attention(q, k, v, causal=True))
    if registered:
        rows["attention no-grad (registered op)"] = overhead(
            lambda: _ops._attention_op_path(q, k, v, None, True, None, None, False, "bhsd"))
    rows["SDPA no-grad"] = overhead(
        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    plan = fragmask.AttentionPlan(q, k, v, causal=True)
    rows["AttentionPlan.run"] = overhead(lambda: plan.run(q, k, v))
    default_device_rows(rows, q, k, v)
    decode_rows(rows, q.shape[-1])

    if flex_rows:
        flex_attention, create_block_mask = flex()
        causal = create_block_mask(lambda b, h, i, j: i >= j, None, None, q.shape[2],
                                   q.shape[2])
        rows["Flex no-grad"] = overhead(lambda: flex_attention(q, k, v, block_mask=causal))

    qg, kg, vg = tiny_inputs(True)
    rows["attention autograd forward"] = overhead(
        lambda: fragmask.attention(qg, kg, vg, causal=True), graph=False)
    if registered:
        rows["attention autograd forward (registered op)"] = overhead(
            lambda: _ops._attention_op_path(qg, kg, vg, None, True, None, None, False,
                                            "bhsd"),
            graph=False)
    rows["SDPA autograd forward"] = overhead(
        lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True), graph=False)
    if flex_rows:
        rows["Flex autograd forward"] = overhead(
            lambda: flex_attention(qg, kg, vg, block_mask=causal), graph=False)
    grad = torch.randn_like(q)

    def step(fwd):
        def run():
            fwd().backward(grad)
        return run

    steps = {
        "attention": step(lambda: fragmask.attention(qg, kg, vg, causal=True)),
        "SDPA": step(lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)),
    }
    if flex_rows:
        steps["Flex"] = step(lambda: flex_attention(qg, kg, vg, block_mask=causal))
    if registered:
        steps["attention (registered op)"] = step(lambda: _ops._attention_op_path(
            qg, kg, vg, None, True, None, None, False, "bhsd"))
    for name, fn in steps.items():
        r = overhead(fn)
        fwd = rows.get(f"{name.split(' (')[0]} autograd forward"
                       + (" (registered op)" if "registered" in name else ""))
        if fwd is not None:
            r["backward_host_us"] = r["host_us"] - fwd["host_us"]
        rows[f"{name} autograd forward+backward"] = r
    for t in (qg, kg, vg):
        t.grad = None
    autograd_floor_rows(rows, qg, kg, vg)
    return rows


class _Bare(torch.autograd.Function):
    """An autograd Function with no kernel: an allocation forward, an identity backward."""

    @staticmethod
    def forward(ctx, x):
        out = x.new_empty(x.shape)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g


class _Bare3(torch.autograd.Function):
    """An autograd Function of q, k, v with no kernel: an allocation forward, a backward
    returning the incoming gradient for each (three gradients for autograd to
    accumulate, as an attention's backward gives)."""

    @staticmethod
    def forward(ctx, q, k, v):
        out = q.new_empty(q.shape)
        ctx.save_for_backward(q, k, v, out)
        return out

    @staticmethod
    def backward(ctx, g):
        return g, g, g


def autograd_floor_rows(rows, x, k=None, v=None):
    """torch's own floors under the autograd targets: a kernel-free Function's forward, and
    the same through .backward() (the autograd engine alone), of one input and (with k
    and v) of q, k, v: the engine's work for three gradients, their accumulation into
    ``.grad`` included, as the attention rows' loop has it."""
    rows["floor: bare autograd.Function forward"] = {"host_us": host_us(lambda: _Bare.apply(x))}
    grad = torch.ones_like(x)
    rows["floor: bare autograd.Function forward+backward"] = {
        "host_us": host_us(lambda: _Bare.apply(x).backward(grad))}
    x.grad = None
    if k is not None:
        rows["floor: bare autograd.Function of q, k, v forward"] = {
            "host_us": host_us(lambda: _Bare3.apply(x, k, v))}
        rows["floor: bare autograd.Function of q, k, v forward+backward"] = {
            "host_us": host_us(lambda: _Bare3.apply(x, k, v).backward(grad))}
        x.grad = k.grad = v.grad = None


def default_device_rows(rows, q, k, v):
    """The no-grad rows again under ``torch.set_default_device("cuda")``, whose
    function mode every torch call then passes through."""
    torch.set_default_device("cuda")
    try:
        rows["attention no-grad, default device set"] = overhead(
            lambda: fragmask.attention(q, k, v, causal=True))
        rows["SDPA no-grad, default device set"] = overhead(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        plan = fragmask.AttentionPlan(q, k, v, causal=True)
        rows["AttentionPlan.run, default device set"] = overhead(lambda: plan.run(q, k, v))
    finally:
        torch.set_default_device(None)


def decode_rows(rows, D):
    """Adds the decode rows (one token, 8 heads, a 256-key cache: ``decode``,
    ``DecodePlan.run``, SDPA's) and lightning decode's (H=64, D=E=96, B=1, one token)."""
    dq = torch.randn(1, 1, 8, D, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(1, 256, 8, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    rows["decode"] = overhead(lambda: fragmask.decode(dq, kc, vc))
    dplan = fragmask.DecodePlan(dq, kc, vc)
    rows["DecodePlan.run"] = overhead(lambda: dplan.run(dq, kc, vc))
    sq, sk, sv = dq.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
    rows["SDPA decode"] = overhead(lambda: F.scaled_dot_product_attention(sq, sk, sv))
    lq, lk, lv = (torch.randn(1, 64, 1, 96, device="cuda", dtype=torch.bfloat16)
                  for _ in range(3))
    state = torch.zeros(1, 64, 96, 96, device="cuda", dtype=torch.float32)
    slope = torch.rand(64, device="cuda", dtype=torch.float32) * 0.1
    rows["lightning_decode B=1"] = overhead(lambda: fragmask.lightning_decode(
        lq, lk, lv, state, slope))
    if "out" in inspect.signature(fragmask.lightning_decode).parameters:
        lout = torch.empty_like(lv)
        rows["lightning_decode B=1 (out=)"] = overhead(lambda: fragmask.lightning_decode(
            lq, lk, lv, state, slope, out=lout))


def op_rows(rows=None):
    """The fragmask rows of ``tiny_rows`` and SDPA's beside them, without Flex (no
    compile): quick enough to run twice per wheel in one job, for an A/B of two wheels
    on one machine. Also the floors under them: one torch allocation, one raw
    caching-allocator block, the stream getter, a bare ``torch.autograd.Function``, and
    the launch of a planned forward alone (wheels that have it)."""
    rows = {} if rows is None else rows
    q, k, v = tiny_inputs()
    rows["attention no-grad"] = overhead(lambda: fragmask.attention(q, k, v, causal=True))
    rows["SDPA no-grad"] = overhead(
        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    plan = fragmask.AttentionPlan(q, k, v, causal=True)
    rows["AttentionPlan.run"] = overhead(lambda: plan.run(q, k, v))
    default_device_rows(rows, q, k, v)
    decode_rows(rows, q.shape[-1])
    qg, kg, vg = tiny_inputs(True)
    rows["attention autograd forward"] = overhead(
        lambda: fragmask.attention(qg, kg, vg, causal=True), graph=False)
    rows["SDPA autograd forward"] = overhead(
        lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True), graph=False)
    grad = torch.randn_like(q)
    for name, fwd in (("attention", lambda: fragmask.attention(qg, kg, vg, causal=True)),
                      ("SDPA", lambda: F.scaled_dot_product_attention(qg, kg, vg,
                                                                     is_causal=True))):
        r = overhead(lambda: fwd().backward(grad))
        r["backward_host_us"] = r["host_us"] - rows[f"{name} autograd forward"]["host_us"]
        rows[f"{name} autograd forward+backward"] = r
    for t in (qg, kg, vg):
        t.grad = None
    # Floors.
    rows["floor: q.new_empty"] = {"host_us": host_us(lambda: q.new_empty((1, 2, 256, 128)))}
    stream = torch.cuda.current_stream().cuda_stream
    alloc = torch._C._cuda_cudaCachingAllocator_raw_alloc
    free = torch._C._cuda_cudaCachingAllocator_raw_delete
    rows["floor: raw block alloc+delete"] = {"host_us": host_us(lambda: free(alloc(2048, stream)))}
    getter = torch._C._cuda_getCurrentRawStream
    rows["floor: raw stream getter"] = {"host_us": host_us(lambda: getter(0))}

    autograd_floor_rows(rows, qg)
    if hasattr(_ops, "_forward_plan"):
        entry = _ops._forward_plan(q, k, v, None, True, None, None, False, 0, 0)
        out, lse = torch.empty_like(q), q.new_empty((1, 2, 256), dtype=torch.float32)
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), 0, 0,
                stream)
        run = entry[0].run_ptrs
        # No graph: ptrs name the current stream, not a capture stream.
        rows["floor: planned forward launch alone"] = overhead(lambda: run(*ptrs), graph=False)
    return rows


def ab_rows(base_name, rounds=4):
    """The op rows of two builds in one process: ``fragmask`` and the package
    ``base_name`` (another wheel installed under that name, its op namespace renamed),
    measured in alternating order ``rounds`` times, so that both see the same host state
    (a host shared with other jobs moves between processes by more than the change being
    measured). Returns {build: {row: [overhead() per round]}}."""
    import importlib

    base = importlib.import_module(base_name)
    base.warmup(head_dims=(128,), lightning=((96, 96, "bf16"),))
    q, k, v = tiny_inputs()
    D = q.shape[-1]
    dq = torch.randn(1, 1, 8, D, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(1, 256, 8, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lq, lk, lv = (torch.randn(1, 64, 1, 96, device="cuda", dtype=torch.bfloat16)
                  for _ in range(3))
    state = torch.zeros(1, 64, 96, 96, device="cuda", dtype=torch.float32)
    slope = torch.rand(64, device="cuda", dtype=torch.float32) * 0.1
    sq, sk, sv = dq.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
    qg, kg, vg = tiny_inputs(True)
    grad = torch.randn_like(q)

    def table(fm):
        plan = fm.AttentionPlan(q, k, v, causal=True)
        dplan = fm.DecodePlan(dq, kc, vc)
        return {
            "attention no-grad": (lambda: fm.attention(q, k, v, causal=True), True),
            "AttentionPlan.run": (lambda: plan.run(q, k, v), True),
            "decode": (lambda: fm.decode(dq, kc, vc), True),
            "DecodePlan.run": (lambda: dplan.run(dq, kc, vc), True),
            "lightning_decode B=1": (lambda: fm.lightning_decode(lq, lk, lv, state, slope),
                                     True),
            "attention autograd forward": (lambda: fm.attention(qg, kg, vg, causal=True),
                                           False),
            "attention autograd forward+backward": (
                lambda: fm.attention(qg, kg, vg, causal=True).backward(grad), True),
        }

    sdpa = {
        "attention no-grad": (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                              True),
        "attention autograd forward": (
            lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True), False),
        "attention autograd forward+backward": (
            lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True).backward(grad),
            True),
        "decode": (lambda: F.scaled_dot_product_attention(sq, sk, sv), True),
    }
    tables = {"base": table(base), "new": table(fragmask), "SDPA": sdpa}
    out = {b: {} for b in tables}
    for r in range(rounds):
        order = ("base", "new", "SDPA") if r % 2 == 0 else ("new", "base", "SDPA")
        for name in tables["new"]:
            for b in order:
                if name in tables[b]:
                    fn, graph = tables[b][name]
                    out[b].setdefault(name, []).append(overhead(fn, graph))
        for t in (qg, kg, vg):
            t.grad = None
    return out


def ab_table(out):
    """Medians over rounds: eager, graph and the target quantities (the no-grad
    overhead, the autograd forward's eager minus the no-grad graph time, the backward's
    step overhead minus the forward's), per build."""
    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else None

    def m(b, row, key):
        return med([r[key] for r in out[b].get(row, []) if key in r])

    rows = []
    for b in out:
        ng = m(b, "attention no-grad", "graph_us")
        fwd = m(b, "attention autograd forward", "eager_us")
        fwd_over = None if fwd is None or ng is None else fwd - ng
        step = m(b, "attention autograd forward+backward", "overhead_us")
        rows.append((b, {
            "no-grad": m(b, "attention no-grad", "overhead_us"),
            "autograd fwd": fwd_over,
            "autograd bwd": None if step is None or fwd_over is None else step - fwd_over,
            "decode": m(b, "decode", "overhead_us"),
            "DecodePlan.run": m(b, "DecodePlan.run", "overhead_us"),
            "lightning": m(b, "lightning_decode B=1", "overhead_us"),
            "AttentionPlan.run": m(b, "AttentionPlan.run", "overhead_us"),
        }))
    return rows


def decode_sweep_rows():
    """Serving decode shapes (D=128, bf16, [B, Sk, Hkv, D] caches from torch.randn) at
    several split counts, eager and in a CUDA graph, as fractions of the copy roof; and
    B=16, Sk=8192 with K and V in one allocation at a 2^28-byte and at an odd distance
    (is a power-of-two distance between K and V what one split suffers from?)."""
    bf = torch.bfloat16
    r = {}

    def row(name, fn, roof):
        ms = step_ms(fn, iters=30)
        g = graph_ms(fn, n=10)
        r[name] = {"ms": ms, "of_roof": roof / ms, "graph_of_roof": roof / g}

    for B, H, HKV, SK, counts in ((16, 32, 8, 8192, (1, 2, 3, 4)),
                                  (1, 32, 8, 65536, (8, 16, 32)),
                                  (8, 64, 8, 16384, (2, 4)),
                                  (64, 32, 8, 4096, (1, 2))):
        q = torch.randn(B, 1, H, 128, device="cuda", dtype=bf)
        k, v = (torch.randn(B, SK, HKV, 128, device="cuda", dtype=bf) for _ in range(2))
        roof = copy_roof_ms(2 * k.numel() * 2)
        auto = fragmask.DecodePlan(q, k, v)
        for n in (None,) + counts:
            p = auto if n is None else fragmask.DecodePlan(q, k, v, splits=n)
            row(f"B={B} H={H} Sk={SK} splits={'auto ' if n is None else ''}{p.splits}",
                lambda: p.run(q, k, v), roof)
        del k, v
    B, SK = 16, 8192
    q = torch.randn(B, 1, 32, 128, device="cuda", dtype=bf)
    n = B * SK * 8 * 128
    roof = copy_roof_ms(4 * n)
    for gap in (0, 4096 + 512):
        buf = torch.randn(2 * n + gap, device="cuda", dtype=bf)
        k, v = buf[:n].view(B, SK, 8, 128), buf[n + gap:].view(B, SK, 8, 128)
        for splits in (1, 2):
            p = fragmask.DecodePlan(q, k, v, splits=splits)
            row(f"B=16 Sk=8192 K->V {2 * (n + gap)} bytes splits={splits}",
                lambda: p.run(q, k, v), roof)
        del buf, k, v
    qa = torch.randn(B, 32, 1, 128, device="cuda", dtype=bf)
    ka, va = (torch.randn(B, 8, SK, 128, device="cuda", dtype=bf) for _ in range(2))
    row(f"fragmask.attention B=16 Sk=8192 (bhsd, {fragmask.AttentionPlan(qa, ka, va).splits}"
        " splits)", lambda: fragmask.attention(qa, ka, va), roof)
    return r


def step_ms(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    return events_ms(fn, n=iters, reps=5)


def document_step():
    """S=8192, H=16, D=128, 12 causal documents: forward + backward through autograd,
    fragmask against FlexAttention (compiled). Each step starts with q, k, v's ``.grad``
    set to None, as FlashAttention's ``benchmark_backward`` does and as a training step
    sees (q, k, v are a projection's outputs there, or the optimizer zeroes the grads to
    None): otherwise autograd adds every step's gradients into the last ones, three
    bf16 elementwise kernels (about 0.1 ms here) that are neither system's work. The
    accumulating step is kept as ``*_accumulating_ms``."""
    S, H, D = 8192, 16, 128
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
               .requires_grad_() for _ in range(3))
    cuts = torch.linspace(0, S, 13).round().long()
    ids = torch.zeros(S, dtype=torch.int64)
    for i in range(12):
        ids[cuts[i]:cuts[i + 1]] = i
    mask = Mask.from_predicate("causal", S, doc_ids=ids.numpy()).with_transposed().to("cuda")
    grad = torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16)
    flex_attention, create_block_mask = flex()
    dev_ids = ids.cuda()
    bm = create_block_mask(lambda b, h, i, j: (dev_ids[i] == dev_ids[j]) & (i >= j),
                           None, None, S, S)
    def fresh(fn):
        def step():
            q.grad = k.grad = v.grad = None
            fn()
        return step

    fm_step = lambda: fragmask.attention(q, k, v, mask).backward(grad)  # noqa: E731
    flex_step = lambda: flex_attention(q, k, v, block_mask=bm).backward(grad)  # noqa: E731
    r = {}
    r["fragmask_fwd_bwd_ms"] = step_ms(fresh(fm_step))
    r["flex_fwd_bwd_ms"] = step_ms(fresh(flex_step))
    r["fragmask_fwd_bwd_accumulating_ms"] = step_ms(fm_step)
    r["flex_fwd_bwd_accumulating_ms"] = step_ms(flex_step)
    with torch.no_grad():
        r["fragmask_fwd_ms"] = step_ms(lambda: fragmask.attention(q, k, v, mask))
        r["flex_fwd_ms"] = step_ms(lambda: flex_attention(q, k, v, block_mask=bm))
    r["flex_over_fragmask"] = r["flex_fwd_bwd_ms"] / r["fragmask_fwd_bwd_ms"]
    r["flex_over_fragmask_accumulating"] = (r["flex_fwd_bwd_accumulating_ms"]
                                            / r["fragmask_fwd_bwd_accumulating_ms"])
    out = fragmask.attention(q.detach(), k.detach(), v.detach(), mask)
    ref = flex_attention(q.detach(), k.detach(), v.detach(), block_mask=bm)
    r["max_abs_diff_vs_flex"] = (out.float() - ref.float()).abs().max().item()
    return r


def lightning_rows():
    """Lightning decode eager, H=64, D=E=96: µs per step at B=1, fraction of the copy
    roof at B=16 (the state is read and written once per step; at B=16 its 38 MB fit
    in the H100's 50 MB L2, so a loop of steps can beat the DRAM roof)."""
    r = {}
    for B in (1, 16):
        q, k, v = (torch.randn(B, 64, 1, 96, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        state = torch.zeros(B, 64, 96, 96, device="cuda", dtype=torch.float32)
        slope = torch.rand(64, device="cuda", dtype=torch.float32) * 0.1
        ms = step_ms(lambda: fragmask.lightning_decode(q, k, v, state, slope), iters=200)
        nbytes = 2 * state.numel() * 4 + 4 * B * 64 * 96 * 2
        roof = copy_roof_ms(nbytes)
        r[f"B={B}"] = {"us_per_step": ms * 1e3, "copy_roof_us": roof * 1e3,
                       "fraction_of_roof": roof / ms}
    return r


def vsa_decode_rows():
    """Write-up 002's decode (64 queries, H=12, Sk=23296, D=128, 64-token blocks) eager
    through fragmask.attention at 10% and 50% of the key blocks."""
    H, N, D, BS, SQ = 12, 23296, 128, 64, 64
    NB = N // BS
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, H, s, D, device="cuda", dtype=torch.bfloat16, generator=g)
               for s in (SQ, N, N))
    r = {}
    for frac in (0.1, 0.5):
        cg = torch.Generator().manual_seed(int(frac * 1000))
        kept = round(frac * NB)
        idx = torch.rand(H, 1, NB, generator=cg).topk(kept, dim=-1).indices.sort(dim=-1).values
        m = Mask.from_blocks(idx.int(), torch.full((H, 1), kept, dtype=torch.int32),
                             seqlen_q=SQ, seqlen_k=N, block=(64, 64), warpgroups=1).to("cuda")
        eager = step_ms(lambda: fragmask.attention(q, k, v, m), iters=50)
        plan = fragmask.AttentionPlan(q, k, v, m)
        r[f"{int(frac * 100)}%"] = {"eager_ms": eager,
                                     "plan_run_ms": step_ms(lambda: plan.run(q, k, v), 50),
                                     "graph_ms": graph_ms(lambda: fragmask.attention(q, k, v, m),
                                                          n=20),
                                     "splits": plan.splits}
    return r


def decode_entry_rows():
    """Decode shapes through fragmask.attention (B=16, H=32, Hkv=8, Sk=8192, D=128, one
    query row): fraction of the copy roof of reading K and V, beside fragmask.decode."""
    B, H, HKV, SK, D = 16, 32, 8, 8192, 128
    q = torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, HKV, SK, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    roof = copy_roof_ms(2 * k.numel() * 2)
    att = step_ms(lambda: fragmask.attention(q, k, v), iters=50)
    qd = q.transpose(1, 2).contiguous()
    kd, vd = k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous()
    dec = step_ms(lambda: fragmask.decode(qd, kd, vd), iters=50)
    plan = fragmask.AttentionPlan(q, k, v)
    dplan = fragmask.DecodePlan(qd, kd, vd)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # a non-default stream, as the CLI's bench uses
        dec_side = step_ms(lambda: fragmask.decode(qd, kd, vd), iters=50)
    torch.cuda.current_stream().wait_stream(side)
    dec_graph = graph_ms(lambda: fragmask.decode(qd, kd, vd), n=20)
    return {"attention_ms": att, "decode_ms": dec, "copy_roof_ms": roof,
            "attention_fraction_of_roof": roof / att, "decode_fraction_of_roof": roof / dec,
            "decode_side_stream_ms": dec_side, "decode_graph_ms": dec_graph,
            "decode_graph_fraction_of_roof": roof / dec_graph,
            "attention_splits": plan.splits, "decode_splits": dplan.splits}


def target_rows(results):
    """The op layer's targets (host overhead = eager minus the CUDA-graph time of the
    same kernels; the autograd forward's kernel is the no-grad call's, the backward's
    overhead is the forward+backward step's minus the forward's), with torch's SDPA and
    FlexAttention measured the same way beside them."""
    t = results.get("tiny", {})

    def get(row, key):
        r = t.get(row)
        return None if not isinstance(r, dict) or key not in r else r[key]

    def over(row):
        return get(row, "overhead_us")

    def fwd_over(name):
        eager, graph = get(f"{name} autograd forward", "eager_us"), get(f"{name} no-grad",
                                                                           "graph_us")
        return None if eager is None or graph is None else eager - graph

    def bwd_over(name):
        step, fwd = over(f"{name} autograd forward+backward"), fwd_over(name)
        return None if step is None or fwd is None else step - fwd

    def engine_floor(of=""):
        both = get(f"floor: bare autograd.Function{of} forward+backward", "host_us")
        fwd = get(f"floor: bare autograd.Function{of} forward", "host_us")
        return None if both is None or fwd is None else both - fwd

    def over_floor(name):
        bwd, floor = bwd_over(name), engine_floor(" of q, k, v")
        return None if bwd is None or floor is None else bwd - floor

    rows = [
        ("eager attention, no grad (us)", "<= 8", over("attention no-grad"),
         over("SDPA no-grad"), over("Flex no-grad")),
        ("autograd forward (us)", "<= 15", fwd_over("attention"), fwd_over("SDPA"),
         fwd_over("Flex")),
        ("autograd backward, over its kernels (us)", "<= 20", bwd_over("attention"),
         bwd_over("SDPA"), bwd_over("Flex")),
        ("torch's floor: a kernel-free autograd.Function's backward (us)", "-",
         engine_floor(), None, None),
        ("torch's floor: the same of q, k, v, three gradients accumulated (us)", "-",
         engine_floor(" of q, k, v"), None, None),
        ("autograd backward over its kernels, minus that floor (us)", "-",
         over_floor("attention"), over_floor("SDPA"), over_floor("Flex")),
        ("decode (us)", "<= 8", over("decode"), over("SDPA decode"), None),
        ("DecodePlan.run (us)", "-", over("DecodePlan.run"), None, None),
        ("lightning_decode (us)", "<= 6", over("lightning_decode B=1"), None, None),
        ("lightning_decode with out= (us)", "<= 6", over("lightning_decode B=1 (out=)"), None, None),
        ("AttentionPlan.run (us)", "<= 4", over("AttentionPlan.run"), None, None),
    ]
    d = results.get("document_step", {})
    rows.append(("S=8192 H=16 D=128 12 causal docs fwd+bwd, Flex time / fragmask time",
                 ">= 1.3", d.get("flex_over_fragmask"), None, None))
    rows.append(("the same, grads accumulating into q, k, v's .grad across steps", "-",
                 d.get("flex_over_fragmask_accumulating"), None, None))
    lt = results.get("lightning", {})
    rows.append(("lightning decode eager H=64 D=E=96 B=1 (us per step)", "<= 10",
                 lt.get("B=1", {}).get("us_per_step"), None, None))
    rows.append(("lightning decode eager B=16 (fraction of copy roof)", ">= 0.80",
                 lt.get("B=16", {}).get("fraction_of_roof"), None, None))
    vsa = results.get("vsa_decode", {})
    for frac, target in (("10%", "<= 0.025"), ("50%", "<= 0.045")):
        rows.append((f"write-up 002 decode eager {frac} of blocks (ms)", target,
                     vsa.get(frac, {}).get("eager_ms"), None, None))
    de = results.get("decode_entry", {})
    rows.append(("decode shape through fragmask.attention (fraction of copy roof)",
                 ">= 0.90", de.get("attention_fraction_of_roof"), None, None))
    return rows


def mask_rows(S=512, H=2, D=128, keep=0.3):
    """Host overhead per autograd forward+backward call with a 64x64 block mask, packed
    on the host (the backward pairs its key blocks from the host lists; the forward's
    shared-K/V tile) and on the GPU (its lists on the device only: both unpaired), beside
    the same call with no mask: what the plans' tables cost on the run path."""
    g = torch.Generator(device="cuda").manual_seed(3)
    blocks = torch.rand(H, S // 64, S // 64, device="cuda", generator=g) < keep
    dense = blocks.repeat_interleave(64, 1).repeat_interleave(64, 2)
    q, k, v = tiny_inputs(True, H=H, S=S, D=D)
    grad = torch.randn_like(q)
    calls = {"no mask": None,
             "64x64 mask packed on the host": Mask.from_dense(
                 dense.cpu(), block=(64, 64), transposed=True),
             "64x64 mask packed on the GPU": Mask.from_dense(
                 dense, block=(64, 64), transposed=True)}
    rows = {}
    for name, m in calls.items():
        fwd = overhead(lambda: fragmask.attention(q, k, v, m), graph=False)
        step = overhead(lambda: fragmask.attention(q, k, v, m).backward(grad))
        step["backward_host_us"] = step["host_us"] - fwd["host_us"]
        rows[f"{name}: autograd forward"] = fwd
        rows[f"{name}: autograd forward+backward"] = step
    for t in (q, k, v):
        t.grad = None
    return rows


def in_rounds(section, n):
    """``section`` run ``n`` times, merged by ``median_of_rounds``."""
    return lambda: median_of_rounds([section() for _ in range(n)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--targets-only", action="store_true",
                    help="skip the registered-op rows (the targets' rows only)")
    ap.add_argument("--tiny-only", action="store_true",
                    help="only the tiny rows without Flex and the registered ops, and "
                    "the targets' table of them: for an A/B of wheels in separate runs")
    ap.add_argument("--ops-only", action="store_true",
                    help="only op_rows (no Flex, no step-level rows): for an A/B of wheels")
    ap.add_argument("--mask-only", action="store_true",
                    help="only mask_rows: 64x64 masks packed on the host and on the GPU")
    ap.add_argument("--decode-sweep", action="store_true",
                    help="only serving decode shapes at several split counts")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of the tiny and lightning rows (median per field; 1 to 9)")
    ap.add_argument("--ab", metavar="PACKAGE",
                    help="only the op rows of fragmask and of PACKAGE (another build "
                    "installed under that name), alternated in this process")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 9:
        ap.error("--rounds must be 1 to 9")
    fragmask.warmup(head_dims=(128,), lightning=((96, 96, "bf16"),))
    results = {"device": torch.cuda.get_device_name()}
    if args.ab:
        out = ab_rows(args.ab)
        table = ab_table(out)
        cols = list(table[0][1])
        print("| build | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for b, vals in table:
            print(f"| {b} | " + " | ".join("-" if vals[c] is None else f"{vals[c]:.1f}"
                                          for c in cols) + " |")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"rounds": out, "medians": dict(table)}, fh, indent=1)
        return
    if args.ops_only or args.decode_sweep or args.mask_only:
        rows = (op_rows() if args.ops_only
                else in_rounds(mask_rows, args.rounds)() if args.mask_only
                else decode_sweep_rows())
        for name, r in rows.items():
            if name == "rounds":
                continue
            if isinstance(r, dict):
                print(f"| {name} | " + " | ".join(
                    f"{k_}={v_:.4g}" if isinstance(v_, float) else f"{k_}={v_}"
                    for k_, v_ in r.items()) + " |")
            else:
                print(f"| {name} | {r} |")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
        return

    def save():   # after every row: a run cut short keeps what it measured
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1)

    def tiny():
        rows = results["tiny"] = _Rows(save)   # this round's rows, saved as they come
        return tiny_rows(rows, registered=not (args.targets_only or args.tiny_only),
                         flex_rows=not args.tiny_only)

    # The host-bound sections run args.rounds times, each round all of their rows in
    # order, and report the median of the rounds per field: a row measured first in a
    # process (a cold CPU, allocator, interpreter) otherwise reads up to 2x its later
    # value, and the same call varied 9-17 us between single runs on one host.
    sections = (("tiny", in_rounds(tiny, args.rounds)),
                ("lightning", in_rounds(lightning_rows, args.rounds)),
                ("vsa_decode", vsa_decode_rows),
                ("decode_entry", decode_entry_rows), ("document_step", document_step))
    if args.tiny_only:
        sections = sections[:2]
    for name, fn in sections:
        try:
            results[name] = fn()
        except Exception as e:  # noqa: BLE001  (one failing section does not hide the rest)
            results[name] = {"error": f"{type(e).__name__}: {e}"[:500]}
            traceback.print_exc()
        print(f"== {name}: {json.dumps(results[name], indent=1)}", flush=True)
        save()
    print("\nHost overhead on a tiny shape (B=1 H=2 S=256 D=128 causal; decode 1x8 over 256 "
          "keys; lightning B=1 H=64 D=E=96), us per call")
    print("| call | eager | CPU (host) | CUDA graph | overhead (eager - graph) |")
    print("|---|---|---|---|---|")
    for name, r in results.get("tiny", {}).items():
        if isinstance(r, dict):
            f = lambda key: f"{r[key]:.1f}" if key in r else "-"  # noqa: E731
            print(f"| {name} | {f('eager_us')} | {f('host_us')} | {f('graph_us')} | "
                  f"{f('overhead_us')} |")
    print("\nTargets (SDPA and Flex measured the same way, same run)")
    print("| what | target | fragmask | SDPA | Flex |")
    print("|---|---|---|---|---|")
    rows = target_rows(results)
    results["targets"] = [list(r) for r in rows]
    for name, target, *vals in rows:
        cells = ["-" if x is None else (f"{x:.3f}" if abs(x) < 2 else f"{x:.1f}")
                 for x in vals]
        print(f"| {name} | {target} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
