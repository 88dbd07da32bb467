"""`fragmask.Mask.from_dense` on a CUDA bool tensor (the GPU packer on torch's stream)
beside `fragmask bench packer` on the same bytes and FlexAttention's
`create_block_mask` on the same tensor, in one run (issue 12's target: within 1.2x of
the CLI, far below create_block_mask).

Timings are CUDA events, median after warm-up:
- "per call": events around each call with the GPU idle before it, as the CLI times
  each pack (`time_on_stream`): the call's own host time until its first kernel counts;
- "back to back": events around 20 calls in a row, divided by 20 (the host's work
  overlaps the previous call's kernels);
- host: perf_counter per call (the GPU idle before each).
The packed result is checked against the CPU packer, bit for bit.

usage: python3 bench/python_from_dense.py --fragmask .carry/fragmask [--json out.json]
"""
import argparse
import json
import re
import statistics
import subprocess
import time

import numpy as np
import torch

import fragmask
from fragmask import Mask


def per_call_ms(fn, warmup=3, runs=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def back_to_back_ms(fn, n=20, reps=5):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / n)
    return statistics.median(times)


def host_us(fn, runs=20):
    samples = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--mask-file", default="/tmp/fragmask_from_dense_mask.npy")
    ap.add_argument("--json")
    args = ap.parse_args()
    s = args.seqlen
    torch.manual_seed(0)
    dense = torch.rand(s, s, device="cuda") < 0.5
    fragmask.warmup(head_dims=(), lightning=(), packer_tiles=((128, 128), (64, 64)))
    result = {}

    t0 = time.perf_counter()
    cpu = Mask.from_dense(dense.cpu())
    result["cpu_packer_ms_one_run_incl_copy"] = (time.perf_counter() - t0) * 1e3
    gpu = Mask.from_dense(dense)
    result["identical_to_cpu_packer"] = gpu == cpu
    result["partial_tiles"] = gpu.stats()["partial"]

    for block in ((128, 128), (64, 64)):
        call = lambda: Mask.from_dense(dense, block=block)
        key = f"{block[0]}x{block[1]}"
        result[f"from_dense_{key}_per_call_ms"] = per_call_ms(call)
        result[f"from_dense_{key}_back_to_back_ms"] = back_to_back_ms(call)
        result[f"from_dense_{key}_host_us"] = host_us(call)

    np.save(args.mask_file, dense.cpu().numpy())
    cli = subprocess.run([args.fragmask, "bench", "packer", "--npy", args.mask_file, "--no-cpu",
                          "--runs", "20"], capture_output=True, text=True)
    print(cli.stdout, cli.stderr)
    result["cli_bench_packer_ms"] = float(re.search(r"GPU packer: ([0-9.]+) ms median",
                                                    cli.stdout).group(1))

    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, q_idx, kv_idx):
        return dense[q_idx, kv_idx]

    build = lambda: create_block_mask(mask_mod, B=None, H=None, Q_LEN=s, KV_LEN=s,
                                      device="cuda", BLOCK_SIZE=128)
    flex = build()
    result["flex_partial_tiles"] = int(flex.kv_num_blocks.sum().item())
    result["create_block_mask_ms"] = per_call_ms(build, warmup=2, runs=10)

    cli_ms = result["cli_bench_packer_ms"]
    print(f"Dense bool mask {s} x {s} (random 50%) on the GPU; ms, median")
    print(f"identical to the CPU packer: {result['identical_to_cpu_packer']}; partial tiles "
          f"{result['partial_tiles']} (FlexAttention: {result['flex_partial_tiles']})")
    print("| system | per call | back to back | host us per call | per call / CLI |")
    print("|---|---|---|---|---|")
    print(f"| fragmask bench packer (CLI, 128x128) | {cli_ms:.4f} | - | - | 1.00 |")
    for key in ("128x128", "64x64"):
        pc = result[f"from_dense_{key}_per_call_ms"]
        print(f"| Mask.from_dense(cuda), block {key} | {pc:.4f} | "
              f"{result[f'from_dense_{key}_back_to_back_ms']:.4f} | "
              f"{result[f'from_dense_{key}_host_us']:.1f} | {pc / cli_ms:.2f} |")
    print(f"| create_block_mask (BLOCK_SIZE=128) | {result['create_block_mask_ms']:.3f} | - | - | "
          f"{result['create_block_mask_ms'] / cli_ms:.1f} |")
    print(f"| CPU packer (host copy + pack, one run) | {result['cpu_packer_ms_one_run_incl_copy']:.1f}"
          " | - | - | - |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
