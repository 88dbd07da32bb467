#!/usr/bin/env python3
"""FlexAttention's create_block_mask against fragmask's GPU packer, same mask, same run.

Builds one dense bool mask on the GPU (random, `--density` ones), times
torch.nn.attention.flex_attention.create_block_mask on it (mask_mod reading the bool
tensor, BLOCK_SIZE=128; CUDA events after warm-up, median), saves the mask as .npy,
runs `fragmask bench packer --npy ... --json ...` on the same bytes, and prints one
table. Tile counts of both are compared (FlexAttention's partial = kv_num_blocks,
full = full_kv_num_blocks).

    python3 bench/packer_bench.py --fragmask target/release/fragmask --out /tmp/out
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def time_cuda(fn, warmup, runs):
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples), samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--density", type=float, default=0.5)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fragmask", default=os.environ.get("FRAGMASK_BIN", "target/release/fragmask"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"), help="folder for the JSON result")
    ap.add_argument("--mask-file", default="/tmp/fragmask_packer_bench_mask.npy",
                    help="where the mask is saved for fragmask (large: Sq*Sk bytes)")
    ap.add_argument("--compiled", action="store_true",
                    help="also time create_block_mask(..., _compile=True) (compiles first: slow)")
    args = ap.parse_args()

    import numpy as np
    import torch
    from torch.nn.attention.flex_attention import create_block_mask

    s = args.seqlen
    torch.manual_seed(args.seed)
    mask = torch.rand(s, s, device="cuda") < args.density
    torch.cuda.synchronize()

    def mask_mod(b, h, q_idx, kv_idx):
        return mask[q_idx, kv_idx]

    def build(compile_=False):
        kwargs = {"_compile": True} if compile_ else {}
        return create_block_mask(mask_mod, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda",
                                 BLOCK_SIZE=128, **kwargs)

    rows = []
    flex = build()
    flex_partial = int(flex.kv_num_blocks.sum().item())
    flex_full = int(flex.full_kv_num_blocks.sum().item()) if flex.full_kv_num_blocks is not None else 0
    flex_ms, _ = time_cuda(build, args.warmup, args.runs)
    rows.append(("FlexAttention create_block_mask", flex_ms))
    if args.compiled:
        t0 = time.time()
        build(True)
        print(f"create_block_mask(_compile=True): first call (compilation) {time.time() - t0:.1f} s", flush=True)
        ms, _ = time_cuda(lambda: build(True), args.warmup, args.runs)
        rows.append(("FlexAttention create_block_mask(_compile=True)", ms))

    np.save(args.mask_file, mask.cpu().numpy())
    json_path = os.path.join(args.out, "packer_fragmask.json")
    cmd = [args.fragmask, "bench", "packer", "--npy", args.mask_file, "--runs", str(args.runs),
           "--json", json_path]
    print("+", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        print(f"fragmask bench packer failed with exit code {done.returncode}")
        return 1
    with open(json_path) as f:
        ours = json.load(f)
    rows.append(("fragmask GPU packer (3 kernels)", ours["median_ms"]))
    if ours.get("cpu") and ours["cpu"].get("ms") is not None:
        rows.append(("fragmask CPU packer (one run)", ours["cpu"]["ms"]))

    dense_gb = s * s / 1e9
    print()
    print(f"Same {s}x{s} bool mask ({args.density:.0%} ones), 128x128 tiles, median of {args.runs} runs")
    print(f"{'system':<48} {'ms':>10} {'GB/s of mask':>13} {'vs FlexAttention':>17}")
    for name, ms in rows:
        print(f"{name:<48} {ms:>10.3f} {dense_gb / (ms / 1e3):>13.0f} {flex_ms / ms:>16.1f}x")
    print(f"tiles: FlexAttention partial {flex_partial} full {flex_full}; "
          f"fragmask partial {ours['partial_tiles']} full {ours.get('full_tiles', '?')}")
    same = flex_partial == ours["partial_tiles"] and flex_full == ours.get("full_tiles", flex_full)
    print(f"tile classes agree: {same}")
    summary = {
        "seqlen": s,
        "density": args.density,
        "runs": args.runs,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "rows": [{"system": n, "median_ms": ms} for n, ms in rows],
        "flex_partial": flex_partial,
        "flex_full": flex_full,
        "fragmask": ours,
        "tile_classes_agree": same,
    }
    with open(os.path.join(args.out, "packer_vs_flex.json"), "w") as f:
        json.dump(summary, f, indent=2)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
