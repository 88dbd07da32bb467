#!/usr/bin/env python3
"""Masked attention forward on one GPU: fragmask vs FlexAttention vs torch SDPA, side by side.

Runs on the GPU machine (torch + triton there; our Rust binary built elsewhere and carried):

    python3 bench/attention_bench.py --bin .carry/fragmask --sizes 4096,16384 --out $OUT

For every sequence length S (B=1, H=16, D=128, bf16) and mask:
  none, causal, random tokens 50% / 10% kept, block-sparse (10% of 128x128 tiles kept,
  50% of tokens inside), top-k (k = S/8 random keys per query),
it times (median of CUDA-event-timed runs after warm-up, all on the same device):
  * fragmask        - our binary (`fragmask attention --bench --json`), FragmentNative mask
                      (none/causal computed in-kernel, no mask words)
  * flex            - torch FlexAttention, bool tensor in mask_mod + create_block_mask
  * sdpa_bool       - torch SDPA with the same bool mask
  * sdpa_dense / sdpa_causal - torch SDPA without mask / is_causal (flash/cuDNN)
and checks fragmask's O against SDPA's (relative L2 over rows with a visible key).

STAND-IN PACKER: `fragmask pack` (the masks crate) was not available when this script was
written, so the FragmentNative packing is done here in torch on the GPU (`pack_fragment_native`,
clearly a stand-in; it follows the normative format of crates/host/src/attention/blockmask.rs).
Its time is reported as fragmask's mask build time; Flex's is create_block_mask's.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

BLOCK = 128


def fragment_owner_index(device):
    """(row, col) in the 128x128 tile of consumer thread ct's value v: the wgmma m64n128
    accumulator (DESIGN fact 1, CLayout_64x128), warpgroup ct//128 owns rows 64*wg..64*wg+63."""
    ct = torch.arange(256, device=device)[:, None]
    v = torch.arange(64, device=device)[None, :]
    wg, lt = ct // 128, ct % 128
    row = 64 * wg + 16 * (lt // 32) + (lt % 32) // 4 + 8 * ((v // 2) % 2)
    col = 8 * (v // 4) + 2 * (lt % 4) + (v % 2)
    return row, col


def pack_fragment_native(mask, sq, sk):
    """STAND-IN for `fragmask pack`: bool [Sq, Sk] (CUDA) -> FragmentNative tensors (B=H=1)."""
    dev = mask.device
    mb, nb = math.ceil(sq / BLOCK), math.ceil(sk / BLOCK)
    padded = torch.zeros(mb * BLOCK, nb * BLOCK, dtype=torch.bool, device=dev)
    padded[:sq, :sk] = mask
    tiles = padded.view(mb, BLOCK, nb, BLOCK).permute(0, 2, 1, 3)  # [Mb, Nb, 128, 128]
    count = tiles.sum(dim=(2, 3), dtype=torch.int32)
    rows_in = torch.clamp(sq - torch.arange(mb, device=dev) * BLOCK, max=BLOCK)
    cols_in = torch.clamp(sk - torch.arange(nb, device=dev) * BLOCK, max=BLOCK)
    valid = (rows_in[:, None] * cols_in[None, :]).to(torch.int32)
    full = count == valid
    partial = (count > 0) & ~full
    ar = torch.arange(nb, device=dev)

    def lists(sel):
        num = sel.sum(dim=1, dtype=torch.int32)
        order = torch.argsort((~sel).to(torch.int64) * (2 * nb) + ar, dim=1, stable=True).to(torch.int32)
        idx = torch.where(ar[None, :] < num[:, None], order, torch.zeros_like(order))
        return num, idx

    kv_num, kv_idx = lists(partial)
    full_num, full_idx = lists(full)
    starts = torch.cumsum(kv_num, 0, dtype=torch.int32) - kv_num
    offsets = torch.where(ar[None, :] < kv_num[:, None], starts[:, None] + ar[None, :].to(torch.int32),
                          torch.zeros_like(kv_idx))
    # Partial tiles in (m, n) row-major order = the order of `offsets` above.
    m_idx, n_idx = torch.nonzero(partial, as_tuple=True)
    rows, cols = fragment_owner_index(dev)
    words = torch.empty(m_idx.numel(), 256, 2, dtype=torch.int32, device=dev)
    weights = (torch.ones(32, dtype=torch.int64, device=dev) << torch.arange(32, device=dev))
    chunk = 4096
    for s in range(0, m_idx.numel(), chunk):
        t = tiles[m_idx[s:s + chunk], n_idx[s:s + chunk]]  # [c, 128, 128]
        bits = t[:, rows, cols].to(torch.int64)  # [c, 256, 64]
        w = (bits.view(-1, 256, 2, 32) * weights).sum(-1)  # [c, 256, 2] in 0..2^32-1
        words[s:s + chunk] = (w - ((w >> 31) << 32)).to(torch.int32)  # two's complement u32 bits
    return {
        "kv_num_blocks": kv_num.view(1, 1, mb).contiguous(),
        "kv_indices": kv_idx.view(1, 1, mb, nb).contiguous(),
        "full_kv_num_blocks": full_num.view(1, 1, mb).contiguous(),
        "full_kv_indices": full_idx.view(1, 1, mb, nb).contiguous(),
        "kv_tile_offsets": offsets.view(1, 1, mb, nb).contiguous(),
        "words": words.contiguous(),
    }, int((partial | full).sum()), int(partial.sum())


def make_mask(kind, s, gen, device):
    if kind == "random50":
        return torch.rand(s, s, device=device, generator=gen) < 0.5
    if kind == "random10":
        return torch.rand(s, s, device=device, generator=gen) < 0.1
    if kind == "blocksparse":
        nbk = math.ceil(s / BLOCK)
        keep = torch.rand(nbk, nbk, device=device, generator=gen) < 0.10
        inside = torch.rand(s, s, device=device, generator=gen) < 0.5
        return keep.repeat_interleave(BLOCK, 0)[:s].repeat_interleave(BLOCK, 1)[:, :s] & inside
    if kind == "topk":
        k = s // 8
        scores = torch.rand(s, s, device=device, generator=gen)
        idx = scores.topk(k, dim=1).indices
        del scores
        m = torch.zeros(s, s, dtype=torch.bool, device=device)
        m.scatter_(1, idx, True)
        return m
    raise ValueError(kind)


def bench_ms(fn, warmup=10, iters=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def run_fragmask(args, inputs, extra):
    cmd = [args.bin, "attention", "--inputs", inputs, "--bench", "--json", "--warmup", str(args.warmup),
           "--iters", str(args.iters)] + extra
    env = dict(os.environ)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=".carry/fragmask")
    ap.add_argument("--sizes", default="4096,16384")
    ap.add_argument("--masks", default="none,causal,random50,random10,blocksparse,topk")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--workdir", default="/tmp/fragmask_bench")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--verify-pack", action="store_true",
                    help="for S <= 4096 also pack each mask with `fragmask pack` (CPU, from .npy) and check "
                         "that the kernel gives the same O from that file")
    ap.add_argument("--variants", default="",
                    help="extra fragmask configurations, e.g. 'pp=--pingpong true;serial=--no-overlap'")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    from safetensors.torch import load_file, save_file
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    variants = []
    for item in filter(None, args.variants.split(";")):
        name, _, flags = item.partition("=")
        variants.append((name.strip(), flags.split()))
    dev = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    rows = []
    for s in [int(x) for x in args.sizes.split(",")]:
        gen = torch.Generator(device=dev).manual_seed(s)
        shape = (1, args.heads, s, args.dim)
        q, k, v = (torch.randn(shape, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(3))
        inputs = os.path.join(args.workdir, f"qkv_{s}.safetensors")
        save_file({"q": q.contiguous(), "k": k.contiguous(), "v": v.contiguous()}, inputs)
        dense_flops = 4.0 * args.heads * s * s * args.dim
        tile_flops = 4.0 * BLOCK * BLOCK * args.dim * args.heads
        n_tiles = math.ceil(s / BLOCK) ** 2
        mask_buf = torch.zeros(s, s, dtype=torch.bool, device=dev)  # one captured tensor: one Flex compile

        def tensor_mod(b, h, q_idx, kv_idx):
            return mask_buf[q_idx, kv_idx]

        def causal_mod(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        for kind in args.masks.split(","):
            rec = {"S": s, "mask": kind}
            kept_tiles = n_tiles
            ref = None
            try:
                if kind == "none":
                    rec["sdpa_dense_ms"] = bench_ms(lambda: F.scaled_dot_product_attention(q, k, v))
                    ref = F.scaled_dot_product_attention(q, k, v)
                    if not args.no_flex:
                        rec["flex_ms"] = bench_ms(lambda: flex(q, k, v))
                    extra = []
                elif kind == "causal":
                    rec["sdpa_causal_ms"] = bench_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    kept_tiles = math.ceil(s / BLOCK) * (math.ceil(s / BLOCK) + 1) // 2
                    if not args.no_flex:
                        t0 = time.perf_counter()
                        bm = create_block_mask(causal_mod, None, None, s, s, device=dev)
                        torch.cuda.synchronize()
                        rec["flex_build_ms"] = (time.perf_counter() - t0) * 1e3
                        rec["flex_ms"] = bench_ms(lambda: flex(q, k, v, block_mask=bm))
                    extra = ["--causal"]
                else:
                    mask = make_mask(kind, s, gen, dev)
                    row_visible = mask.any(dim=1)  # SDPA gives rows with no visible key a finite, non-zero O
                    mask_buf.copy_(mask)
                    am = mask[None, None]
                    rec["sdpa_bool_ms"] = bench_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=am))
                    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=am)
                    rec["sdpa_bool_mask_mb"] = s * s / 2**20
                    if not args.no_flex:
                        create_block_mask(tensor_mod, None, None, s, s, device=dev)  # warm-up
                        torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        bm = create_block_mask(tensor_mod, None, None, s, s, device=dev)
                        torch.cuda.synchronize()
                        rec["flex_build_ms"] = (time.perf_counter() - t0) * 1e3
                        rec["flex_ms"] = bench_ms(lambda: flex(q, k, v, block_mask=bm))
                        ref_flex = flex(q, k, v, block_mask=bm)
                        d = (ref_flex.float() - ref.float())[:, :, row_visible]
                        rec["flex_vs_sdpa_rel"] = float(d.norm() / ref.float()[:, :, row_visible].norm())
                    pack_fragment_native(mask, s, s)  # warm-up
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    packed, kept_tiles, partial = pack_fragment_native(mask, s, s)
                    torch.cuda.synchronize()
                    rec["fragmask_build_ms"] = (time.perf_counter() - t0) * 1e3
                    rec["fragmask_mask_mb"] = sum(t.numel() * 4 for t in packed.values()) / 2**20
                    rec["partial_tiles"] = partial
                    pack_path = os.path.join(args.workdir, f"pack_{s}_{kind}.safetensors")
                    save_file({n: t.cpu() for n, t in packed.items()}, pack_path,
                              metadata={"seqlen_q": str(s), "seqlen_k": str(s), "format": "fragment_native"})
                    extra = ["--mask", pack_path]
                    if args.verify_pack and s <= 4096:
                        import numpy as np
                        npy = os.path.join(args.workdir, f"mask_{s}_{kind}.npy")
                        np.save(npy, mask.cpu().numpy())
                        pack2 = os.path.join(args.workdir, f"pack2_{s}_{kind}.safetensors")
                        t0 = time.perf_counter()
                        subprocess.run([args.bin, "pack", "--mask", npy, "--block", "128x128", "--warpgroups", "2",
                                        "-o", pack2, "-q"], check=True, timeout=300)
                        rec["fragmask_pack_cli_build_ms"] = (time.perf_counter() - t0) * 1e3
                        out2 = os.path.join(args.workdir, "o2.safetensors")
                        run_fragmask(args, inputs, ["--mask", pack2, "--out", out2])
                        o2 = load_file(out2)["o"].to(dev).float()
                        rows_ok = row_visible[None, None, :]
                        rec["fragmask_pack_cli_rel_err"] = float(
                            (o2 - ref.float())[rows_ok.expand_as(o2[..., 0])].norm()
                            / ref.float()[rows_ok.expand_as(o2[..., 0])].norm())
                    del mask, am
                out_path = os.path.join(args.workdir, "o.safetensors")
                r = run_fragmask(args, inputs, extra + ["--out", out_path])
                rec["fragmask_ms"] = r["ms_median"]
                rec["fragmask_kernel"] = r["kernel"]
                for name, flags in variants:
                    rv = run_fragmask(args, inputs, extra + flags)
                    rec[f"fragmask[{name}]_ms"] = rv["ms_median"]
                o = load_file(out_path)["o"].to(dev).float()
                reff = ref.float()
                ok_rows = torch.isfinite(reff).all(dim=-1)
                if kind not in ("none", "causal"):
                    ok_rows &= row_visible[None, None, :]
                    rec["rows_without_visible_key"] = int((~row_visible).sum())
                    empty = o[:, :, ~row_visible]
                    rec["fragmask_empty_rows_nonzero"] = int((empty != 0).sum())
                diff = (o - reff)[ok_rows]
                rec["fragmask_rel_err"] = float(diff.norm() / reff[ok_rows].norm())
                rec["fragmask_nan"] = int((~torch.isfinite(o)).sum())
            except Exception as e:  # keep going: one failure must not hide the other numbers
                rec["error"] = repr(e)[-500:]
            rec["kept_tiles_per_head"] = kept_tiles
            for key in [x for x in rec if x.endswith("_ms") and not x.endswith("build_ms")]:
                ms = rec[key]
                rec[key.replace("_ms", "_tf")] = dense_flops / (ms * 1e-3) / 1e12
                rec[key.replace("_ms", "_tf_kept")] = kept_tiles * tile_flops / (ms * 1e-3) / 1e12
            print(json.dumps(rec), flush=True)
            rows.append(rec)
            torch.cuda.empty_cache()
    with open(os.path.join(args.out, "attention_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)

    none_tf = {r["S"]: r.get("fragmask_tf") for r in rows if r["mask"] == "none"}
    print()
    print(f"{'S':>6} {'mask':<12} {'system':<16} {'ms':>8} {'TF dense':>9} {'TF kept':>8} {'vs flex':>8} "
          f"{'build ms':>9} {'mask MB':>8} {'err':>8}")
    for r in rows:
        names = ["fragmask"] + [f"fragmask[{n}]" for n, _ in variants] + ["flex", "sdpa_bool", "sdpa_dense", "sdpa_causal"]
        for sysname in names:
            ms = r.get(f"{sysname}_ms")
            if ms is None:
                continue
            ratio = r["flex_ms"] / ms if r.get("flex_ms") else float("nan")
            build = r.get(f"{sysname}_build_ms", float("nan"))
            mb = r.get(f"{sysname}_mask_mb", float("nan"))
            err = r.get("fragmask_rel_err", float("nan")) if sysname == "fragmask" else float("nan")
            print(f"{r['S']:>6} {r['mask']:<12} {sysname:<16} {ms:>8.3f} {r[f'{sysname}_tf']:>9.1f} "
                  f"{r[f'{sysname}_tf_kept']:>8.1f} {ratio:>8.2f} {build:>9.2f} {mb:>8.1f} {err:>8.1e}")
        if "error" in r:
            print(f"{r['S']:>6} {r['mask']:<12} ERROR {r['error'][:200]}")
        if r["mask"] in ("random50", "random10", "topk") and r.get("fragmask_tf") and none_tf.get(r["S"]):
            print(f"{'':>6} {'':<12} fragmask {r['mask']} / fragmask none throughput: "
                  f"{r['fragmask_tf'] / none_tf[r['S']]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
