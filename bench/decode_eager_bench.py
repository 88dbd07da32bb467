"""fragmask.decode from Python: host time per eager call (the fast path that skips the
custom-op dispatch, against the registered op called directly), and the same call's
CUDA-event time eager and replayed from a CUDA graph, masked (write-up 002's lists,
10% and 50% of 64-token blocks) and unmasked (issue 11's first workload).

usage: python3 decode_eager_bench.py   (needs the fragmask wheel on PYTHONPATH, a GPU)
"""
import time

import torch

import fragmask
from fragmask import _ops


def wall_us(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def event_ms(fn, warmup=20, iters=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    out.sort()
    return out[len(out) // 2]


def graph_ms(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return event_ms(g.replay)


def main():
    dev = "cuda"
    rows = []
    # Host time: a tiny call (B=1, Sk=256) whose kernel takes a few microseconds.
    q = torch.randn(1, 1, 8, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 256, 2, 128, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    op = _ops._register_decode()
    fast = wall_us(lambda: fragmask.decode(q, k, v))
    via_op = wall_us(lambda: op(q, k, v, None, None, None, 0, [-1, -1], 0.0, 0,
                                None, None, None, 0))
    rows.append(("host us per call, B=1 Sk=256", f"eager fast path {fast:.1f}",
                 f"registered op {via_op:.1f}", f"{via_op / fast:.2f}x"))
    # Kernel time from Python, eager and graph.
    q = torch.randn(16, 1, 32, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(16, 8192, 8, 128, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    f = lambda: fragmask.decode(q, k, v)  # noqa: E731
    rows.append(("B=16 H=32/8 Sk=8192 ms", f"eager {event_ms(f):.4f}",
                 f"graph {graph_ms(f):.4f}", ""))
    H, N, BS = 12, 23296, 64
    q = torch.randn(1, 64, H, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, N, H, 128, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    g = torch.Generator().manual_seed(5)
    for frac in (0.5, 0.1):
        kept = round(frac * (N // BS))
        idx = torch.rand(H, 1, N // BS, generator=g).topk(kept, -1).indices.sort(-1).values
        mask = fragmask.Mask.from_blocks(idx.to(torch.int32).numpy(),
                                         torch.full((H, 1), kept, dtype=torch.int32).numpy(),
                                         block_size=BS, seqlen_q=64, seqlen_k=N, block=(64, 64))
        f = lambda: fragmask.decode(q, k, v, mask=mask)  # noqa: E731
        rows.append((f"002 {int(frac * 100)}% blocks ms", f"eager {event_ms(f):.4f}",
                     f"graph {graph_ms(f):.4f}", ""))
    print(f"fragmask.decode from Python, {torch.cuda.get_device_name()}")
    for r in rows:
        print(" | ".join(r))


if __name__ == "__main__":
    main()
