"""Lightning decode (write-up 003) side by side on one GPU, in one run:
the write-up's torch code, torch.compile of it, and `fragmask bench lightning`,
each rotating through state sets that add up to --rotate-mb (so the state is read
from HBM, not L2), beside a 1 GiB device-to-device copy (the roof).

usage: python3 bench/lightning_bench.py --fragmask target/release/fragmask [--batch 1,16,64,128]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch


def lightning_attention_decode_naive(q, k, v, past_kv, slope):
    """The write-up's reference code (003, section 0x1), unchanged."""
    original_dtype = q.dtype
    ratio = torch.exp(-slope)  # [h, 1, 1]
    kv = past_kv
    b, h, n, d = q.shape
    output = []
    for i in range(n):
        kv = ratio * kv.to(torch.float32) + torch.einsum(
            "... n d, ... n e -> ... d e", k[:, :, i : i + 1], v[:, :, i : i + 1]
        )
        qkv = torch.einsum(
            "... n e, ... e d -> ... n d", q[:, :, i : i + 1].to(torch.float32), kv.to(torch.float32)
        )
        output.append(qkv)
    output = torch.concat(output, dim=-2)
    return output.to(original_dtype), kv


def median_ms(fn, sets, warmup, iters):
    for _ in range(warmup):
        for s in sets:
            fn(*s)
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for s in sets:
            fn(*s)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / len(sets))
    times.sort()
    return times[len(times) // 2]


def copy_roof(warmup, iters):
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), [()], warmup, iters)
    return ms, 2 * n / (ms * 1e6)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    ap.add_argument("--batch", default="1,16,64,128")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--tokens", type=int, default=1)
    ap.add_argument("--rotate-mb", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    h, d, n = args.heads, args.dim, args.tokens
    roof_ms, roof = copy_roof(args.warmup, args.iters)
    print(f"device {torch.cuda.get_device_name()}: copy roof {roof:.0f} GB/s", flush=True)
    compiled = None if args.no_compile else torch.compile(lightning_attention_decode_naive, dynamic=False)
    batches = [int(b) for b in args.batch.split(",")]
    # fragmask, the same shapes, same device, same run.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "fm.json")
        cmd = [args.fragmask, "bench", "lightning", "--batch", args.batch, "--heads", str(h),
               "--dim", str(d), "--tokens", str(n), "--rotate-mb", str(args.rotate_mb),
               "--iters", str(max(args.iters, 30)), "--json", out]
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        fm = {r["batch"]: r for r in json.load(open(out))["rows"]}
    rows = []
    for b in batches:
        state_bytes = b * h * d * d * 4 * 2
        sets_n = max(1, min(256, -(-args.rotate_mb * (1 << 20) // (state_bytes // 2))))
        sets = []
        for _ in range(sets_n):
            q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
            kv = torch.randn(b, h, d, d, device="cuda", dtype=torch.float32)
            slope = torch.rand(h, 1, 1, device="cuda", dtype=torch.float32)
            sets.append((q, k, v, kv, slope))
        naive_ms = median_ms(lightning_attention_decode_naive, sets, args.warmup, args.iters)
        compile_ms = float("nan")
        if compiled is not None:
            compile_ms = median_ms(compiled, sets, args.warmup, args.iters)
        floor_ms = state_bytes / (roof * 1e6)
        f = fm[b]
        rows.append(dict(batch=b, sets=sets_n, naive_ms=naive_ms, compile_ms=compile_ms,
                         fragmask_ms=f["ms"], fragmask_graph_ms=f["graph_ms"], floor_ms=floor_ms, roof_gbps=roof,
                         fragmask_roof_gbps=f["roof_gbps"], col_vectors=f["col_vectors"]))
        del sets
        torch.cuda.empty_cache()
    print()
    print(f"H={h}, D=E={d}, n={n}, bf16 q/k/v, fp32 state; roof = one read + one write of the state at the copy rate")
    print("| B | torch ms | torch.compile ms | fragmask ms | fragmask vs torch.compile | floor ms | torch / compile / fragmask of roof | fragmask in a CUDA graph: ms, of roof |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        fl = r["floor_ms"]
        print(f"| {r['batch']} | {r['naive_ms']:.4f} | {r['compile_ms']:.4f} | {r['fragmask_ms']:.4f} | "
              f"{r['compile_ms'] / r['fragmask_ms']:.2f}x | {fl:.4f} | "
              f"{fl / r['naive_ms']:.2f} / {fl / r['compile_ms']:.2f} / {fl / r['fragmask_ms']:.2f} | "
              f"{r['fragmask_graph_ms']:.4f}, {fl / r['fragmask_graph_ms']:.2f} |")
    if args.json:
        json.dump(dict(roof_gbps=roof, rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
