"""Masked and top-k decode (issue 11) side by side on one GPU, in one run.

Write-up 002's decode: 64 queries (one 64-token query block) against Sk=23296 keys,
H=12, D=128, bf16, 64-token key blocks; each head keeps a random 50% or 10% of the 364
key blocks (and a variant whose blocks hold 48..64 valid tokens, variable_block_sizes).
  * fragmask   - `fragmask pack --blocks` (the write-up's arrays, .npy) into a 64x64
                 FragmentNative mask, then `fragmask bench decode --mask` (CUDA-event
                 median after warm-up, KV caches rotated out of L2, and a CUDA-graph
                 replay); checked first with `fragmask decode --mask` against the CPU f64
                 reference, and here against fp32 torch on the same lists
                 (beside it, the same call on the wgmma forward with split-KV: q, K, V
                 [B, H, S, D], the forward's split planner)
  * flex       - FlexAttention (compiled) with BlockMask.from_kv_blocks on the same lists
  * sdpa_mask  - torch SDPA with the dense boolean mask
  * sdpa_dense - torch SDPA without a mask (the dense work)
Top-k: q=1, B=16, H=32, Hkv=8, Sk=65536, k=2048 random keys per request:
  * fragmask   - `fragmask bench decode --topk 2048` (dense row and gather row, same cache)
  * sdpa_dense - SDPA over the whole cache (enable_gqa)
  * torch_gather_sdpa - index_select of the k keys, then SDPA
Peers run on hot inputs (no rotation); fragmask's rows rotate caches (>= 256 MB).

usage: python3 decode_mask_bench.py --fragmask PATH [--json out.json]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

H, N, D, BS, SQ = 12, 23296, 128, 64, 64
NB = N // BS


def median_ms(fn, warmup=10, iters=30):
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
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def run(cmd, timeout=300):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = res.stdout + res.stderr
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {out[-1500:]}")
    return res.stdout


def make_lists(frac, variable, seed):
    g = torch.Generator().manual_seed(seed)
    k = max(1, round(frac * NB))
    scores = torch.rand(H, 1, NB, generator=g)
    index = scores.topk(k, dim=-1).indices.sort(dim=-1).values.to(torch.int32)  # [H, 1, k]
    num = torch.full((H, 1), k, dtype=torch.int32)
    sizes = torch.randint(48, 65, (NB,), generator=g, dtype=torch.int32) if variable else None
    return index, num, sizes


def bench_rows(fm, args_list):
    """Runs `fragmask bench decode ... --json` and returns its rows."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    out = run([fm, "bench", "decode", *args_list, "--json", path], timeout=400)
    print(out.strip(), flush=True)
    with open(path) as f:
        return json.load(f)["rows"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="only the 50%% and 10%% whole-block cases: no 48-64 token blocks, "
                         "split scan or top-k")
    args = ap.parse_args()
    fm = args.fragmask
    dev = torch.device("cuda")
    tmp = tempfile.mkdtemp(prefix="decode_mask_")
    rows = []

    def add(row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    torch.manual_seed(0)
    q = torch.randn(1, H, SQ, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, H, N, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, H, N, D, device=dev, dtype=torch.bfloat16)
    from safetensors.torch import load_file, save_file
    inputs = os.path.join(tmp, "inputs.safetensors")
    # fragmask decode files: q [B, Sq, H, D], caches [B, Sk, Hkv, D].
    save_file({"q": q.transpose(1, 2).contiguous().cpu(),
               "k_cache": k.transpose(1, 2).contiguous().cpu(),
               "v_cache": v.transpose(1, 2).contiguous().cpu()}, inputs)
    add({"case": "no mask", "system": "sdpa_dense",
         "ms": median_ms(lambda: F.scaled_dot_product_attention(q, k, v))})
    flex = None
    if not args.no_flex:
        from torch.nn.attention.flex_attention import BlockMask, flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    cases = []
    fractions = [(0.5, False), (0.1, False)] + ([] if args.quick else [(0.5, True), (0.1, True)])
    for frac, variable in fractions:
        case = f"{int(frac * 100)}% blocks" + (", 48-64 tokens" if variable else "")
        index, num, sizes = make_lists(frac, variable, seed=int(frac * 1000) + variable)
        paths = {n: os.path.join(tmp, n + ".npy") for n in ("idx", "num", "sizes")}
        np.save(paths["idx"], index.numpy())
        np.save(paths["num"], num.numpy())
        extra = []
        if sizes is not None:
            np.save(paths["sizes"], sizes.numpy())
            extra = ["--block-sizes", paths["sizes"]]
        mask_p = os.path.join(tmp, "mask.safetensors")
        run([fm, "pack", "--blocks", paths["idx"], "--blocks-num", paths["num"], *extra,
             "--seqlen-q", str(SQ), "--seqlen-k", str(N), "--block", "64x64", "--warpgroups", "1",
             "-q", "-o", mask_p])
        # Dense boolean mask [H, SQ, N] of the same lists.
        blocks = torch.zeros(H, NB, dtype=torch.bool, device=dev)
        for h in range(H):
            blocks[h, index[h, 0, : num[h, 0]].long()] = True
        dense = blocks.repeat_interleave(BS, 1)[:, None, :].expand(H, SQ, N)
        if sizes is not None:
            pos = torch.arange(N, device=dev) % BS
            dense = dense & (pos < sizes.to(dev).repeat_interleave(BS))[None, None, :]
        dense = dense[None].contiguous()
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=dense)
        # fragmask: correctness against torch fp32 and the CPU f64 reference, then timing.
        o_p = os.path.join(tmp, "o.safetensors")
        out = run([fm, "decode", "--inputs", inputs, "--mask", mask_p, "--out", o_p, "--check"])
        print(out.strip().splitlines()[-1], flush=True)
        o = load_file(o_p)["o"].to(dev).float().transpose(1, 2)
        err = ((o - ref).norm() / ref.norm()).item()
        # Both cache orders: [B, Sk, Hkv, D] and head-major [B, Hkv, Sk, D] (the order of
        # q, k, v here and of the write-up's kernels).
        for order, flag in (("", []), (", head-major", ["--head-major"])):
            fr = bench_rows(fm, ["--batch", "1", "--seqlen-q", str(SQ), "--heads", str(H),
                                 "--kv-heads", str(H), "--seqlen-k", str(N), "--dim", str(D),
                                 "--mask", mask_p, "--iters", "50", *flag])
            masked = [r for r in fr if r.get("speedup_vs_plain") is not None][0]
            if not order:  # the same call on the wgmma forward with split-KV (planner)
                for r in (r for r in fr if r.get("kernel")):
                    add({"case": case, "system": f"fragmask wgmma forward split-KV ({r['splits']} splits)",
                         "ms": r["ms"], "graph_ms": 0.0, "splits": r["splits"]})
            add({"case": case,
                 "system": f"fragmask 64x64{order} (planner: {masked['splits']} splits)",
                 "ms": masked["ms"], "graph_ms": masked["graph_ms"], "splits": masked["splits"],
                 "err_vs_torch": err, "roof_fraction": masked["roof_fraction"],
                 "roof_gbps": masked["roof_gbps"]})
        if not variable and not args.quick:  # split scan: the planner's choice against fixed counts
            for n in (4, 12):
                rr = bench_rows(fm, ["--batch", "1", "--seqlen-q", str(SQ), "--heads", str(H),
                                     "--kv-heads", str(H), "--seqlen-k", str(N), "--dim", str(D),
                                     "--mask", mask_p, "--iters", "30", "--splits", str(n)])
                r = [x for x in rr if x.get("speedup_vs_plain") is not None][0]
                add({"case": case, "system": f"fragmask 64x64 splits={n}", "ms": r["ms"],
                     "graph_ms": r["graph_ms"], "splits": n, "roof_fraction": r["roof_fraction"]})
        sm = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense))
        add({"case": case, "system": "sdpa_mask", "ms": sm})
        cases.append((case, index, num, sizes, ref))
        del dense
        torch.cuda.empty_cache()

    if not args.quick:  # ---- top-k sparse decode ----
        B, HQ, HKV, SK, K = 16, 32, 8, 65536, 2048
        fr = bench_rows(fm, ["--batch", str(B), "--heads", str(HQ), "--kv-heads", str(HKV),
                             "--seqlen-k", str(SK), "--dim", str(D), "--topk", str(K), "--iters", "30"])
        for r in fr:
            add({"case": f"top-k {K}/{SK} B={B} H={HQ}/{HKV}", "system": "fragmask " + r["workload"],
                 "ms": r["ms"], "graph_ms": r["graph_ms"], "splits": r["splits"],
                 "roof_fraction": r["roof_fraction"], "speedup_vs_plain": r.get("speedup_vs_plain")})
        qd = torch.randn(B, HQ, 1, D, device=dev, dtype=torch.bfloat16)
        kd = torch.randn(B, HKV, SK, D, device=dev, dtype=torch.bfloat16)
        vd = torch.randn(B, HKV, SK, D, device=dev, dtype=torch.bfloat16)
        case = f"top-k {K}/{SK} B={B} H={HQ}/{HKV}"
        add({"case": case, "system": "sdpa_dense",
             "ms": median_ms(lambda: F.scaled_dot_product_attention(qd, kd, vd, enable_gqa=True))})
        idx = torch.rand(B, SK, device=dev).topk(K, dim=-1).indices.sort(-1).values

        def gather_sdpa():
            i = idx[:, None, :, None].expand(B, HKV, K, D)
            return F.scaled_dot_product_attention(qd, kd.gather(2, i), vd.gather(2, i), enable_gqa=True)
        add({"case": case, "system": "torch_gather_sdpa", "ms": median_ms(gather_sdpa)})

        del qd, kd, vd
        torch.cuda.empty_cache()
    # FlexAttention last (its compiles take the longest).
    for case, index, num, sizes, ref in cases if flex is not None else []:
        try:
            kv_num = num.to(dev)[None].contiguous()               # [1, H, 1]
            kv_idx = torch.zeros(1, H, 1, NB, dtype=torch.int32, device=dev)
            kv_idx[..., : index.shape[-1]] = index.to(dev)[None]
            if sizes is not None:
                valid = (torch.arange(N, device=dev) % BS) < sizes.to(dev).repeat_interleave(BS)

                def mask_mod(b, h, q_idx, kv_idx):
                    return valid[kv_idx]
                bm = BlockMask.from_kv_blocks(kv_num, kv_idx, BLOCK_SIZE=BS, mask_mod=mask_mod,
                                              seq_lengths=(SQ, N))
            else:
                zero = torch.zeros_like(kv_num)
                bm = BlockMask.from_kv_blocks(zero, kv_idx, kv_num, kv_idx, BLOCK_SIZE=BS,
                                              seq_lengths=(SQ, N))
            fo = flex(q, k, v, block_mask=bm)
            ferr = ((fo.float() - ref).norm() / ref.norm()).item()
            add({"case": case, "system": "flex", "ms": median_ms(lambda: flex(q, k, v, block_mask=bm)),
                 "err_vs_torch": ferr})
        except Exception as e:  # report, do not hide
            add({"case": case, "system": "flex", "ms": None, "error": str(e)[-300:]})

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print()
    print(f"masked / top-k decode, {torch.cuda.get_device_name()}")
    print(f"{'case':<34} {'system':<44} {'ms':>8} {'graph ms':>9} {'err':>9} {'of roof':>8}")
    for r in rows:
        ms = r.get("ms")
        print(f"{r['case']:<34} {r['system']:<44} {'-' if ms is None else f'{ms:8.4f}':>8} "
              f"{r.get('graph_ms') or 0:9.4f} {r.get('err_vs_torch') or 0:9.2e} "
              f"{r.get('roof_fraction') or 0:8.3f}")


if __name__ == "__main__":
    main()
