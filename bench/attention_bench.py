#!/usr/bin/env python3
"""Masked attention forward on one GPU: fragmask vs FlexAttention vs torch SDPA, side by side.

Runs on the GPU machine (torch + triton there; our Rust binary built elsewhere and carried):

    python3 bench/attention_bench.py --bin .carry/fragmask --sizes 4096,16384 --out $OUT

For every sequence length S (B=1, H=16, D=128, bf16) and mask:
  none, causal, random tokens 50% / 10% kept, block-sparse (10% of 128x128 tiles kept,
  50% of tokens inside), top-k (k = S/8 random keys per query),
it times (median of CUDA-event-timed runs after warm-up, all on the same device):
  * fragmask        - our binary (`fragmask attention --bench --json`, the code path of
                      `fragmask bench attention`), FragmentNative mask from `fragmask pack`
                      (none/causal computed in-kernel, no mask words)
  * flex            - torch FlexAttention, bool tensor in mask_mod + create_block_mask
  * sdpa_bool       - torch SDPA with the same bool mask
  * sdpa_dense / sdpa_causal - torch SDPA without mask / is_causal (flash/cuDNN)
and checks fragmask's O against SDPA's (relative L2 over rows with a visible key).

Mask build time, our real packers: every mask is saved as a dense bool .npy (temp dir under
--workdir) and handed to `fragmask bench packer --npy FILE --json OUT.json`:
  * build ms (fragmask) - the GPU packer, median of --packer-runs CUDA-event-timed runs after
                          3 warm-up runs, dense mask already on the device (no upload);
  * CPU pack ms         - the CPU packer (masks crate, all threads, one run) from the same
                          JSON, for S <= --cpu-pack-max-s (--no-cpu above it); the packer
                          bench also checks GPU == CPU bit for bit.
The attention run reads the mask packed by `fragmask pack --mask FILE.npy` (CPU packer, the
same bits). Flex's build ms is `create_block_mask` (second call, synchronized wall time).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import bench_common

BLOCK = 128


def safetensors_bytes(path):
    """Bytes of the tensors in a safetensors file (from its header; no dtype support needed)."""
    with open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for n, t in header.items() if n != "__metadata__")


def run_packers(args, mask, s, kind, tmp, log_dir):
    """Our real packers on one dense bool mask: `fragmask bench packer` (GPU packer timing,
    CPU packer timing unless S > --cpu-pack-max-s) and `fragmask pack` (the file the attention
    run reads). Returns (record fields, path of the packed mask)."""
    import numpy as np
    npy = os.path.join(tmp, f"mask_{s}_{kind}.npy")
    np.save(npy, mask.cpu().numpy())
    out_json = os.path.join(log_dir, f"packer_{s}_{kind}.json")
    cmd = [args.bin, "bench", "packer", "--npy", npy, "--json", out_json, "--runs", str(args.packer_runs)]
    if s > args.cpu_pack_max_s:
        cmd.append("--no-cpu")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    with open(os.path.join(log_dir, f"packer_{s}_{kind}.txt"), "w") as f:
        f.write(" ".join(cmd) + "\n" + res.stdout + res.stderr)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc {res.returncode}): {res.stderr.strip()[-2000:]}")
    with open(out_json) as f:
        pk = json.load(f)
    rec = {
        "fragmask_build_ms": pk["median_ms"],
        "fragmask_build_p10_p90": [pk["p10_ms"], pk["p90_ms"]],
        "gpu_packer_gb_per_s_in": pk["input_gb_per_s"],
        "partial_tiles": pk["partial_tiles"],
        "full_tiles": pk["full_tiles"],
    }
    cpu = pk.get("cpu")
    if cpu:
        rec["fragmask_cpu_pack_ms"] = cpu["ms"]
        rec["gpu_pack_equals_cpu_pack"] = cpu["identical"]
    packed = os.path.join(tmp, f"pack_{s}_{kind}.safetensors")
    t0 = time.perf_counter()
    subprocess.run([args.bin, "pack", "--mask", npy, "--block", "128x128", "--warpgroups", "2",
                    "-o", packed, "-q"], check=True, timeout=300)
    rec["fragmask_pack_cli_wall_ms"] = (time.perf_counter() - t0) * 1e3
    rec["fragmask_mask_mb"] = safetensors_bytes(packed) / 2**20
    os.remove(npy)
    return rec, packed


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


def bench_ms(fn):
    return bench_common.bench_ms(fn, warmup=10, iters=30)


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
    ap.add_argument("--packer-runs", type=int, default=20, help="timed runs of `fragmask bench packer`")
    ap.add_argument("--cpu-pack-max-s", type=int, default=16384,
                    help="time the CPU packer (in `fragmask bench packer`) only up to this S")
    ap.add_argument("--variants", default="",
                    help="extra fragmask configurations, e.g. 'pp=--pingpong true;serial=--no-overlap'")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    import tempfile
    log_dir = os.path.join(args.out, "packer")
    os.makedirs(log_dir, exist_ok=True)
    from safetensors.torch import load_file, save_file
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    variants = []
    for item in filter(None, args.variants.split(";")):
        name, _, flags = item.partition("=")
        variants.append((name.strip(), flags.split()))
    systems = ["fragmask"] + [f"fragmask[{n}]" for n, _ in variants] + ["flex", "sdpa_bool", "sdpa_dense",
                                                                      "sdpa_causal"]
    dev = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    rows = []
    for s in [int(x) for x in args.sizes.split(",")]:
        tmp = tempfile.mkdtemp(prefix=f"masks_{s}_", dir=args.workdir)
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
                        create_block_mask(causal_mod, None, None, s, s, device=dev)  # warm-up
                        torch.cuda.synchronize()
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
                    packed_rec, pack_path = run_packers(args, mask, s, kind, tmp, log_dir)
                    rec.update(packed_rec)
                    kept_tiles = packed_rec["partial_tiles"] + packed_rec["full_tiles"]
                    extra = ["--mask", pack_path]
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
            for sysname in systems:
                ms = rec.get(f"{sysname}_ms")
                if ms is None:
                    continue
                rec[f"{sysname}_tf"] = dense_flops / (ms * 1e-3) / 1e12
                rec[f"{sysname}_tf_kept"] = kept_tiles * tile_flops / (ms * 1e-3) / 1e12
            print(json.dumps(rec), flush=True)
            rows.append(rec)
            torch.cuda.empty_cache()
        shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(args.out, "attention_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)

    none_tf = {r["S"]: r.get("fragmask_tf") for r in rows if r["mask"] == "none"}

    def num(x, fmt):
        return "-" if x is None else format(x, fmt)

    print()
    print(f"{'S':>6} {'mask':<12} {'system':<16} {'ms':>8} {'TF dense':>9} {'TF kept':>8} {'vs Flex':>8} "
          f"{'build ms':>9} {'CPU pack ms':>11} {'mask MB':>8} {'err':>8}")
    for r in rows:
        for sysname in systems:
            ms = r.get(f"{sysname}_ms")
            if ms is None:
                continue
            ratio = r["flex_ms"] / ms if r.get("flex_ms") else None
            build = r.get(f"{sysname}_build_ms")
            cpu = r.get(f"{sysname}_cpu_pack_ms")
            mb = r.get(f"{sysname}_mask_mb")
            err = r.get("fragmask_rel_err") if sysname == "fragmask" else None
            print(f"{r['S']:>6} {r['mask']:<12} {sysname:<16} {ms:>8.3f} {r[f'{sysname}_tf']:>9.1f} "
                  f"{r[f'{sysname}_tf_kept']:>8.1f} {num(ratio, '.2f'):>8} {num(build, '.3f'):>9} "
                  f"{num(cpu, '.1f'):>11} {num(mb, '.1f'):>8} {num(err, '.1e'):>8}")
        if r.get("gpu_pack_equals_cpu_pack") is False:
            print(f"{r['S']:>6} {r['mask']:<12} GPU packer != CPU packer (see packer_{r['S']}_{r['mask']}.txt)")
        if "error" in r:
            print(f"{r['S']:>6} {r['mask']:<12} ERROR {r['error'][:200]}")
        if r["mask"] in ("random50", "random10", "topk") and r.get("fragmask_tf") and none_tf.get(r["S"]):
            print(f"{'':>6} {'':<12} fragmask {r['mask']} / fragmask none throughput: "
                  f"{r['fragmask_tf'] / none_tf[r['S']]:.2f}")
    threads = os.cpu_count()
    print(f"build ms: fragmask = GPU packer (`fragmask bench packer --npy`, median of {args.packer_runs} "
          f"CUDA-event-timed runs after 3 warm-up, dense mask already on the device); flex = "
          f"create_block_mask (second call, synchronized wall time). CPU pack ms: CPU packer in the same "
          f"`fragmask bench packer` call, one run, {threads} CPUs, S <= {args.cpu_pack_max_s} only. "
          f"mask MB: packed FragmentNative lists + words (fragmask), dense bool (sdpa_bool). The attention "
          f"run reads the mask `fragmask pack` wrote (CPU packer; GPU == CPU checked bit for bit where the "
          f"CPU packer ran).")

if __name__ == "__main__":
    sys.exit(main())
