#!/usr/bin/env python3
"""Write-up 002's prefill, side by side on one GPU: 64-token block sparsity.

B=1, H=12, N=23296 (364 blocks of 64 tokens), D=128, bf16. Each (head, query block) keeps
a random set of key blocks (fraction `--fracs`); every block is whole (64 valid tokens), or,
with `--variable`, block k holds 48..64 valid tokens (`variable_block_sizes`).

Systems (same inputs, same lists):
  * fragmask <tile>  - `fragmask pack --blocks` (write-up 002's three arrays, .npy) into the
                       tile's FragmentNative file, then `fragmask attention --bench` on it
                       (CUDA-event median after warm-up); tiles 64x64 and 128x128
  * flex             - FlexAttention, BlockMask.from_kv_blocks on the 64-token lists
                       (64x64 blocks, kernel BLOCK_M = BLOCK_N = 64), compiled
  * sdpa_dense       - torch SDPA with no mask (what the dense work costs)
Correctness: fragmask's O (both tiles) against an fp32 reference of heads 0 and 1
computed here from the same lists (rel. L2 over rows with a visible key).

Usage (GPU machine, repo root): python3 bench/video_bench.py --bin .carry/fragmask --out $OUT
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from bench_common import bench_ms

H, N, D, BS = 12, 23296, 128, 64
NB = N // BS




def make_lists(frac, variable, seed):
    g = torch.Generator().manual_seed(seed)
    k = max(1, round(frac * NB))
    scores = torch.rand(H, NB, NB, generator=g)
    index = scores.topk(k, dim=-1).indices.sort(dim=-1).values.to(torch.int32)  # [H, Qb, k]
    num = torch.full((H, NB), k, dtype=torch.int32)
    sizes = None
    if variable:
        sizes = torch.randint(48, 65, (NB,), generator=g, dtype=torch.int32)
    return index, num, sizes


def run(cmd, timeout=600):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-1500:]}")
    return res.stdout


def reference_heads(q, k, v, index, num, sizes, heads):
    """fp32 attention of `heads` under the block lists (chunks of 8 query blocks)."""
    out = {}
    scale = D ** -0.5
    key_valid = torch.ones(N, dtype=torch.bool, device=q.device)
    if sizes is not None:
        pos = torch.arange(N, device=q.device) % BS
        key_valid = pos < sizes.to(q.device).repeat_interleave(BS)
    for h in heads:
        qh, kh, vh = q[0, h].float(), k[0, h].float(), v[0, h].float()
        o = torch.empty(N, D, device=q.device)
        for qb0 in range(0, NB, 8):
            qb1 = min(NB, qb0 + 8)
            rows = slice(qb0 * BS, qb1 * BS)
            blockmask = torch.zeros(qb1 - qb0, NB, dtype=torch.bool, device=q.device)
            for i, qb in enumerate(range(qb0, qb1)):
                blockmask[i, index[h, qb, : num[h, qb]].long()] = True
            m = blockmask.repeat_interleave(BS, 0).repeat_interleave(BS, 1) & key_valid[None, :]
            s = (qh[rows] @ kh.T) * scale
            s = s.masked_fill(~m, float("-inf"))
            p = torch.softmax(s, dim=-1).nan_to_num(0.0)
            o[rows] = p @ vh
        out[h] = o
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".carry/fragmask")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--fracs", default="0.1,0.5")
    ap.add_argument("--tiles", default="64x64,64x64/1,128x128")
    ap.add_argument("--variable", action="store_true", help="also run 48..64-token blocks")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    q = torch.randn(1, H, N, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, H, N, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, H, N, D, device=dev, dtype=torch.bfloat16)
    tmp = tempfile.mkdtemp(prefix="video_bench_")
    from safetensors.torch import save_file, load_file
    inputs = os.path.join(tmp, "qkv.safetensors")
    save_file({"q": q.cpu(), "k": k.cpu(), "v": v.cpu()}, inputs)

    rows = []
    sdpa = bench_ms(lambda: F.scaled_dot_product_attention(q, k, v))
    rows.append({"case": "no mask", "system": "sdpa_dense", "ms": sdpa})
    print(json.dumps(rows[-1]), flush=True)

    flex = None
    if not args.no_flex:
        from torch.nn.attention.flex_attention import BlockMask, flex_attention
        flex = torch.compile(flex_attention, dynamic=False)

    variants = [(float(f), False) for f in args.fracs.split(",")]
    if args.variable:
        variants += [(float(f), True) for f in args.fracs.split(",")]
    for frac, variable in variants:
        case = f"{int(frac * 100)}% blocks" + (", 48-64 tokens" if variable else "")
        index, num, sizes = make_lists(frac, variable, seed=int(frac * 1000) + variable)
        idx_p, num_p, sz_p = (os.path.join(tmp, n) for n in ("idx.npy", "num.npy", "sizes.npy"))
        np.save(idx_p, index.numpy())
        np.save(num_p, num.numpy())
        extra = ["--seqlen-q", str(N), "--seqlen-k", str(N)]
        if sizes is not None:
            np.save(sz_p, sizes.numpy())
            extra += ["--block-sizes", sz_p]
        ref = reference_heads(q, k, v, index.to(dev), num.to(dev), sizes, heads=(0, 1))
        for tile in args.tiles.split(","):
            mn = tile.split("/")[0]          # the mask's tile; "/S" picks key blocks per step
            m, n = mn.split("x")
            wg = int(m) // 64
            mask_p = os.path.join(tmp, f"mask_{mn}.safetensors")
            run([args.bin, "pack", "--blocks", idx_p, "--blocks-num", num_p, *extra,
                 "--block", mn, "--warpgroups", str(wg), "-q", "-o", mask_p])
            o_p = os.path.join(tmp, "o.safetensors")
            out = run([args.bin, "attention", "--inputs", inputs, "--mask", mask_p, "--block", tile,
                       "--bench", "--json", "--warmup", "10", "--iters", str(args.iters), "--out", o_p])
            rec = json.loads(out.strip().splitlines()[-1])
            o = load_file(o_p)["o"].to(dev).float()
            errs = []
            for h, ref_o in ref.items():
                errs.append(((o[0, h] - ref_o).norm() / ref_o.norm()).item())
            row = {"case": case, "system": f"fragmask {tile}", "ms": rec["ms_median"],
                   "visited_tiles": rec["visited_tiles"], "partial_tiles": rec["partial_tiles"],
                   "kernel": rec["kernel"], "err": max(errs)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            os.remove(o_p)
        if flex is not None:
            try:
                kv_num = num.to(dev)[None].contiguous()
                kv_idx = torch.zeros(1, H, NB, NB, dtype=torch.int32, device=dev)
                kv_idx[..., : index.shape[-1]] = index.to(dev)[None]
                key_valid = None
                if sizes is not None:
                    pos = torch.arange(N, device=dev) % BS
                    key_valid = pos < sizes.to(dev).repeat_interleave(BS)

                    def mask_mod(b, h, q_idx, kv_idx):
                        return key_valid[kv_idx]
                    bm = BlockMask.from_kv_blocks(kv_num, kv_idx, BLOCK_SIZE=BS, mask_mod=mask_mod)
                else:
                    # Every kept block is whole: they are FlexAttention's "full" blocks.
                    zero = torch.zeros_like(kv_num)
                    bm = BlockMask.from_kv_blocks(zero, kv_idx, kv_num, kv_idx, BLOCK_SIZE=BS)
                opts = {"BLOCK_M": 64, "BLOCK_N": 64}
                fo = flex(q, k, v, block_mask=bm, kernel_options=opts)
                errs = [((fo[0, h].float() - r).norm() / r.norm()).item() for h, r in ref.items()]
                ms = bench_ms(lambda: flex(q, k, v, block_mask=bm, kernel_options=opts))
                row = {"case": case, "system": "flex 64x64", "ms": ms, "err": max(errs)}
            except Exception as e:  # report, do not hide
                row = {"case": case, "system": "flex 64x64", "ms": None, "error": str(e)[-300:]}
            rows.append(row)
            print(json.dumps(row), flush=True)
        del ref
        torch.cuda.empty_cache()

    with open(os.path.join(args.out, "video_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print(f"write-up 002 prefill, B=1 H={H} N={N} D={D}, {torch.cuda.get_device_name()}")
    print(f"{'case':<26} {'system':<20} {'ms':>8} {'vs flex':>8} {'vs sdpa':>8} {'err':>9}")
    flex_ms = {r["case"]: r["ms"] for r in rows if r["system"].startswith("flex") and r.get("ms")}
    for r in rows:
        ms = r.get("ms")
        fx = flex_ms.get(r["case"])
        print(f"{r['case']:<26} {r['system']:<20} {ms if ms is None else f'{ms:8.3f}':>8} "
              f"{(f'{fx / ms:7.2f}x' if fx and ms else '-'):>8} {(f'{sdpa / ms:7.2f}x' if ms else '-'):>8} "
              f"{(format(r['err'], '.2e') if 'err' in r else r.get('error', '-')[:60]):>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
