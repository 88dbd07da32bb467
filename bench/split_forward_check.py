"""Write-up 002's decode on the split-KV wgmma forward, checked against fp32 torch.

64 queries, H=12, Sk=23296, D=128, bf16, each head keeping a random 50% or 10% of its
64-token key blocks: `fragmask pack --blocks` packs the lists on 64x64 tiles, `fragmask
attention --mask --splits N --out` runs the forward (split-KV + combine), and o is
compared with torch SDPA in fp32 on the dense bool mask of the same lists (relative L2
error), lse with the fp32 logsumexp. Prints one line per (density, splits).

usage: python3 split_forward_check.py --fragmask PATH [--splits 1,16,22]
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from bench_common import run_checked as run

H, N, D, BS, SQ = 12, 23296, 128, 64, 64
NB = N // BS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    ap.add_argument("--splits", default="1,16,22")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="split_fwd_")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    q = torch.randn(1, H, SQ, D, dtype=torch.bfloat16)
    k = torch.randn(1, H, N, D, dtype=torch.bfloat16)
    v = torch.randn(1, H, N, D, dtype=torch.bfloat16)
    inputs = os.path.join(tmp, "inputs.safetensors")
    save_file({"q": q, "k": k, "v": v}, inputs)
    qf, kf, vf = (t.to(dev).float() for t in (q, k, v))
    worst = 0.0
    for frac in (0.5, 0.1):
        g = torch.Generator().manual_seed(int(frac * 1000))
        kept = round(frac * NB)
        index = torch.rand(H, 1, NB, generator=g).topk(kept, dim=-1).indices.sort(dim=-1).values
        idx_p, num_p = os.path.join(tmp, "idx.npy"), os.path.join(tmp, "num.npy")
        np.save(idx_p, index.to(torch.int32).numpy())
        np.save(num_p, np.full((H, 1), kept, dtype=np.int32))
        mask_p = os.path.join(tmp, "mask.safetensors")
        run([args.fragmask, "pack", "--blocks", idx_p, "--blocks-num", num_p, "--seqlen-q", str(SQ),
             "--seqlen-k", str(N), "--block", "64x64", "--warpgroups", "1", "-q", "-o", mask_p])
        blocks = torch.zeros(H, NB, dtype=torch.bool, device=dev)
        for h in range(H):
            blocks[h, index[h, 0].long().to(dev)] = True
        dense = blocks.repeat_interleave(BS, 1)[None, :, None, :].expand(1, H, SQ, N)
        ref = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=dense)
        scores = (qf @ kf.transpose(-1, -2)) / D ** 0.5
        ref_lse = scores.masked_fill(~dense, float("-inf")).logsumexp(-1)
        for splits in args.splits.split(","):
            out = os.path.join(tmp, f"o_{splits}.safetensors")
            run([args.fragmask, "attention", "--inputs", inputs, "--mask", mask_p, "--splits", splits,
                 "--out", out])
            res = load_file(out)
            o = res["o"].to(dev).float()
            lse = res["lse"].to(dev).float()
            err = ((o - ref).norm() / ref.norm()).item()
            lse_err = (lse - ref_lse).abs().max().item()
            worst = max(worst, err)
            print(f"{int(frac * 100)}% of blocks, splits {splits}: o rel. error {err:.3e}, "
                  f"lse max abs. error {lse_err:.3e}", flush=True)
    print(f"worst o rel. error {worst:.3e}: {'PASS' if worst < 2e-2 else 'FAIL'}")


if __name__ == "__main__":
    main()
