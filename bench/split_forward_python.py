"""Write-up 002's decode through the Python op, ``fragmask.attention`` (split-KV planned by
the forward): 64 queries, H=12, Sk=23296, D=128, bf16, each head keeping a random 50% or
10% of its 64-token key blocks (``Mask.from_blocks``, 64x64 tiles). o against fp32 torch
SDPA on the dense bool mask of the same lists; time of the call (CUDA events, median of
50 after 10 warm-up, hot inputs: what a PyTorch caller sees, Python overhead included).

usage: python3 split_forward_python.py
"""
import torch
import torch.nn.functional as F

import fragmask
from bench_common import bench_ms
from fragmask import Mask

H, N, D, BS, SQ = 12, 23296, 128, 64, 64
NB = N // BS


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, H, s, D, device="cuda", dtype=torch.bfloat16, generator=g)
               for s in (SQ, N, N))
    print(f"write-up 002 decode through fragmask.attention, {torch.cuda.get_device_name()}")
    for frac in (0.5, 0.1):
        cg = torch.Generator().manual_seed(int(frac * 1000))
        kept = round(frac * NB)
        idx = torch.rand(H, 1, NB, generator=cg).topk(kept, dim=-1).indices.sort(dim=-1).values
        m = Mask.from_blocks(idx.int(), torch.full((H, 1), kept, dtype=torch.int32),
                             seqlen_q=SQ, seqlen_k=N, block=(64, 64), warpgroups=1).to("cuda")
        blocks = torch.zeros(H, NB, dtype=torch.bool, device="cuda")
        for h in range(H):
            blocks[h, idx[h, 0].cuda()] = True
        dense = blocks.repeat_interleave(BS, 1)[None, :, None, :].expand(1, H, SQ, N)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=dense)
        out = fragmask.attention(q, k, v, m)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ms = bench_ms(lambda: fragmask.attention(q, k, v, m), warmup=10, iters=50)
        print(f"{int(frac * 100)}% of blocks: o rel. error {err:.3e} "
              f"({'PASS' if err < 2e-2 else 'FAIL'}), {ms:.4f} ms per call")


if __name__ == "__main__":
    main()
