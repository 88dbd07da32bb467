"""Overhead of one fragmask.attention call from Python (issue 12's target), beside the
bare kernel timed by `fragmask bench attention` on the same shape, in one run:
eager (CUDA events around many back-to-back calls) and inside a CUDA graph.

usage: python3 bench/python_overhead.py --fragmask .carry/fragmask
"""
import argparse
import re
import subprocess

import torch

import fragmask


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    args = ap.parse_args()
    fragmask.warmup(head_dims=(128,))
    rows = []
    for (B, H, S) in [(1, 16, 4096), (1, 2, 256)]:
        D = 128
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        call = lambda: fragmask.attention(q, k, v, causal=True)
        call()
        eager = per_call_ms(call)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        n = 100
        with torch.cuda.graph(g):
            for _ in range(n):
                call()
        graph = per_call_ms(g.replay, n=5) / n
        cli = subprocess.run([args.fragmask, "bench", "attention", "--random",
                              f"{B},{H},{H},{S},{S},{D}", "--causal"],
                             capture_output=True, text=True).stdout
        kernel = float(re.search(r"median ([0-9.]+) ms", cli).group(1))
        rows.append((B, H, S, D, kernel, eager, graph))
    print("fragmask.attention(causal=True), bf16; ms per call; the same kernel as the CLI row")
    print("| B | H | S | D | bare kernel (fragmask bench attention --causal) | Python eager | Python in a CUDA graph | eager - graph (dispatch) |")
    print("|---|---|---|---|---|---|---|---|")
    for B, H, S, D, kernel, eager, graph in rows:
        print(f"| {B} | {H} | {S} | {D} | {kernel:.4f} | {eager:.4f} | {graph:.4f} | {(eager - graph) * 1000:.1f} us |")


if __name__ == "__main__":
    main()
