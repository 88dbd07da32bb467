#!/usr/bin/env python3
"""Tile geometries per head dim, side by side with torch SDPA in one run.

B=1, H=16, S=16384 (`--seq`), bf16. For each head dim and each geometry that supports it:
`fragmask bench attention --random ... --block TILE` with no mask and with
`--synthetic-mask random:0.5` (CUDA-event median after warm-up), and torch SDPA with no mask
(flash / cuDNN) for the same shape. Prints one table; JSON lines go to $OUT/geometry_bench.json.

Usage (GPU machine, repo root): python3 bench/geometry_bench.py --bin .carry/fragmask
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

from bench_common import bench_ms

TILES = {64: ["128x128", "192x128", "128x64", "64x64"],
         128: ["128x128", "128x80", "64x64"],
         256: ["128x128", "128x80", "128x64"]}
# --quick: the defaults and the tiles they replaced.
QUICK = {64: ["128x128", "192x128"], 128: ["128x128"], 256: ["128x128", "128x80"]}




def fragmask(binary, s, d, tile, mask, extra=()):
    cmd = [binary, "bench", "attention", "--random", f"1,16,16,{s},{s},{d}", "--block", tile,
           "--json", "--warmup", "10", "--iters", "30"] + (["--synthetic-mask", mask] if mask else []) + list(extra)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        return {"error": res.stderr.strip()[-300:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".carry/fragmask")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--dims", default="64,128,256")
    ap.add_argument("--quick", action="store_true", help="only the default tiles and those they replaced")
    ap.add_argument("--extra-128", action="store_true", help="D=128: also top-k S/8 and causal")
    args = ap.parse_args()
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        q, k, v = (torch.randn(1, 16, args.seq, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        sdpa = bench_ms(lambda: F.scaled_dot_product_attention(q, k, v))
        del q, k, v
        rows.append({"d": d, "system": "sdpa", "tile": "-", "none_ms": sdpa})
        if d == 128 and args.extra_128:
            q, k, v = (torch.randn(1, 16, args.seq, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            sdpa_c = bench_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            del q, k, v
            rows.append({"d": d, "system": "sdpa", "tile": "causal", "none_ms": sdpa_c})
            for mask in ("topk:0.125", "causal"):
                r = fragmask(args.bin, args.seq, d, "128x128", None if mask == "causal" else mask,
                             ["--causal"] if mask == "causal" else [])
                rows.append({"d": d, "system": f"fragmask {mask}", "tile": "128x128",
                             "none_ms": r.get("ms_median"), "error": r.get("error")})
                print(json.dumps(rows[-1]), flush=True)
        for tile in (QUICK if args.quick else TILES)[d]:
            none = fragmask(args.bin, args.seq, d, tile, None)
            rand = fragmask(args.bin, args.seq, d, tile, "random:0.5")
            rows.append({"d": d, "system": "fragmask", "tile": tile, "none_ms": none.get("ms_median"),
                         "random50_ms": rand.get("ms_median"), "kernel": none.get("kernel"),
                         "error": none.get("error") or rand.get("error")})
            print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(args.out, "geometry_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(f"\nS={args.seq}, B=1, H=16, bf16, {torch.cuda.get_device_name()}")
    print(f"{'D':>4} {'system':<9} {'tile':<8} {'none ms':>8} {'vs SDPA':>8} {'rand50 ms':>9} {'rand/none':>9}")
    sdpa_ms = {r["d"]: r["none_ms"] for r in rows if r["system"] == "sdpa" and r["tile"] == "-"}
    for r in rows:
        n, m = r.get("none_ms"), r.get("random50_ms")
        ratio = f"{sdpa_ms[r['d']] / n:7.3f}x" if n else "-"
        print(f"{r['d']:>4} {r['system']:<9} {r['tile']:<8} {n if n is None else f'{n:8.3f}':>8} "
              f"{ratio:>8} "
              f"{(f'{m:9.3f}' if m else '-'):>9} {(f'{m / n:9.3f}' if m and n else '-'):>9} "
              f"{(r.get('error') or '')[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
