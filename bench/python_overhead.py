"""Overhead of one fragmask.attention call from Python (issue 12's target), beside the
bare kernel timed by `fragmask bench attention` on the same shape, in one run.

GPU side (CUDA events): many back-to-back calls in eager mode, through the eager fast
path and through the registered torch.library op, and the replay of a CUDA graph of
captured calls. Host side (perf_counter, the GPU kept ahead of nothing): where an eager
call's CPU time goes: the whole call, the registered op's path, the extension's launch
alone (arguments prebuilt: PyO3 conversions, checks, three TMA descriptor encodings,
cuLaunchKernel), the two output allocations and torch's current-stream getter.

usage: python3 bench/python_overhead.py --fragmask .carry/fragmask [--json out.json]
"""
import argparse
import json
import re
import subprocess
import time

import torch

import fragmask
from fragmask import _ops


def per_call_ms(fn, n=500, reps=7):
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


def host_us(fn, n=200, reps=9):
    """Median over reps of the host time per call of n calls (200 launches stay well
    below the launch queue's depth, so the host never waits for the GPU)."""
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


def graph_ms(call, n=100):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        call()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            call()
    return per_call_ms(g.replay, n=5) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    fragmask.warmup(head_dims=(128,))
    rows, host = [], {}
    for (B, H, S) in [(1, 16, 4096), (1, 2, 256)]:
        D = 128
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        fast = lambda: fragmask.attention(q, k, v, causal=True)
        op = lambda: _ops._attention_op_path(q, k, v, None, True, None, None, False, "bhsd")
        assert torch.equal(fast(), op())
        fast()
        op()
        eager = per_call_ms(fast)
        eager_op = per_call_ms(op)
        graph = graph_ms(fast)
        cli = subprocess.run([args.fragmask, "bench", "attention", "--random",
                              f"{B},{H},{H},{S},{S},{D}", "--causal"],
                             capture_output=True, text=True).stdout
        kernel = float(re.search(r"median ([0-9.]+) ms", cli).group(1))
        rows.append(dict(B=B, H=H, S=S, D=D, kernel_ms=kernel, eager_ms=eager,
                         eager_op_ms=eager_op, graph_ms=graph))
        if S == 256:
            out, lse = q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)
            dev = q.get_device()
            stream = torch._C._cuda_getCurrentRawStream(dev)
            launch_args = ((q.data_ptr(), q.shape, q.stride()), (k.data_ptr(), k.shape, k.stride()),
                           (v.data_ptr(), v.shape, v.stride()), out.data_ptr(), lse.data_ptr(),
                           0, None, True, -1, -1, D ** -0.5, False, stream, dev)
            launch = _ops._launch
            host = {
                "eager call (fast path)": host_us(fast),
                "eager call (registered op)": host_us(op),
                "extension launch alone (args prebuilt)": host_us(lambda: launch(*launch_args)),
                "two tensor allocations (new_empty x2)": host_us(
                    lambda: (q.new_empty((B, H, S, D)), q.new_empty((B, H, S), dtype=torch.float32))),
                "current raw stream": host_us(lambda: torch._C._cuda_getCurrentRawStream(dev)),
                "lse block (caching allocator raw alloc + delete)": host_us(
                    lambda: torch._C._cuda_cudaCachingAllocator_raw_delete(
                        torch._C._cuda_cudaCachingAllocator_raw_alloc(B * H * S * 4, stream))),
                "fast-path gate (_plain)": host_us(lambda: _ops._plain(q, k, v)),
            }
    print("fragmask.attention(causal=True), bf16; ms per call; the same kernel as the CLI row")
    print("| B | H | S | D | bare kernel (fragmask bench attention --causal) | Python eager (fast path) | "
          "Python eager (registered op) | Python in a CUDA graph | eager - graph | graph / kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['B']} | {r['H']} | {r['S']} | {r['D']} | {r['kernel_ms']:.4f} | {r['eager_ms']:.4f} | "
              f"{r['eager_op_ms']:.4f} | {r['graph_ms']:.4f} | "
              f"{(r['eager_ms'] - r['graph_ms']) * 1000:.1f} us | {r['graph_ms'] / r['kernel_ms']:.3f} |")
    print()
    print("Host time per call at 1x2x256x128 (perf_counter, median of 9 x 200 calls)")
    print("| part | us |")
    print("|---|---|")
    for name, us in host.items():
        print(f"| {name} | {us:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "host_us": host}, f, indent=1)


if __name__ == "__main__":
    main()
