"""Shared helpers of the GPU comparison scripts in bench/ (run from the repository root)."""
import torch


def bench_ms(fn, warmup=5, iters=20):
    """Median of `iters` CUDA-event timings of `fn()` after `warmup` untimed calls, in ms."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]
