"""Shared helpers of the GPU comparison scripts in bench/ (run from the repository root)."""
import subprocess

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


def run_checked(cmd, timeout=300):
    """Runs `cmd` and returns its stdout; raises with the tail of its output on failure."""
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): "
                           f"{res.stdout[-800:]}{res.stderr[-800:]}")
    return res.stdout
