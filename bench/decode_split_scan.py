"""Write-up 002's masked decode over a range of densities and split counts (issue 11).

Where the time of a masked decode call goes: for each fraction of kept 64-token blocks,
`fragmask bench decode --mask` at the planner's split count and at fixed counts, for one
or more fragmask binaries side by side (same masks, same device, same run). A slope of
time against blocks per CTA separates the per-step cost from the fixed cost of a launch.

usage: python3 decode_split_scan.py --fragmask A [--fragmask B ...] [--fractions 0.02,0.1]
       [--splits 0,8,12,16] (0 = the planner's count)
"""
import argparse
import json
import os
import tempfile

import numpy as np
import torch

from bench_common import run_checked as run

H, N, D, BS, SQ = 12, 23296, 128, 64, 64
NB = N // BS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", action="append", required=True)
    ap.add_argument("--fractions", default="0.01,0.05,0.1,0.2,0.5")
    ap.add_argument("--splits", default="0,8,12,16")
    ap.add_argument("--iters", default="30")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="decode_scan_")
    table = []
    for frac in [float(f) for f in args.fractions.split(",")]:
        g = torch.Generator().manual_seed(int(frac * 1000))
        k = max(1, round(frac * NB))
        index = torch.rand(H, 1, NB, generator=g).topk(k, dim=-1).indices.sort(dim=-1).values
        idx_p, num_p = os.path.join(tmp, "idx.npy"), os.path.join(tmp, "num.npy")
        np.save(idx_p, index.to(torch.int32).numpy())
        np.save(num_p, np.full((H, 1), k, dtype=np.int32))
        mask_p = os.path.join(tmp, f"mask_{frac}.safetensors")
        run([args.fragmask[0], "pack", "--blocks", idx_p, "--blocks-num", num_p,
             "--seqlen-q", str(SQ), "--seqlen-k", str(N), "--block", "64x64",
             "--warpgroups", "1", "-q", "-o", mask_p])
        for splits in [int(s) for s in args.splits.split(",")]:
            for fm in args.fragmask:
                js = os.path.join(tmp, "rows.json")
                cmd = [fm, "bench", "decode", "--batch", "1", "--seqlen-q", str(SQ), "--heads", str(H),
                       "--kv-heads", str(H), "--seqlen-k", str(N), "--dim", str(D), "--mask", mask_p,
                       "--iters", args.iters, "--json", js]
                if splits:
                    cmd += ["--splits", str(splits)]
                run(cmd)
                with open(js) as f:
                    row = [r for r in json.load(f)["rows"] if r.get("speedup_vs_plain") is not None][0]
                table.append((frac, k, splits, row["splits"], fm, row["ms"], row["graph_ms"]))
                print(json.dumps(table[-1]), flush=True)
    print(f"\nmasked decode, write-up 002 shape, {torch.cuda.get_device_name()}; ms (median of {args.iters})")
    print(f"{'kept':>6} {'blocks':>6} {'asked':>5} {'splits':>6} {'ms':>8} {'graph':>8}  binary")
    for frac, k, asked, splits, fm, ms, gms in table:
        print(f"{frac:6.2f} {k:6d} {asked or 'plan':>5} {splits:6d} {ms:8.4f} {gms:8.4f}  {fm}")


if __name__ == "__main__":
    main()
