#!/usr/bin/env python3
"""Masked attention backward on one GPU: torch SDPA / FlexAttention (and fragmask, when the
binary has `bench backward`), side by side (issue 13's workloads).

Runs on the GPU machine (torch + triton there; our Rust binary built elsewhere and carried):

    python3 bench/backward_bench.py --bin .carry/fragmask --out $OUT

Workloads (B=1, D=128, bf16; H=16 unless noted):
  sdpa-none      S=16384, 8192   torch SDPA (flash/cuDNN), no mask
  flex-none      S=16384, 8192   FlexAttention, no mask
  random50       S=16384, 8192   random 50% token mask (FlexAttention, bool tensor in mask_mod)
  docs12         S=8192          12 documents, causal within each (FlexAttention mask_mod)
  topk           S=16384         k = S/8 random keys per query (FlexAttention, bool tensor)
  video10        N=23296, H=12   write-up 002 block lists, 10% of 64-token blocks kept
                                 (FlexAttention BlockMask.from_kv_blocks, 64-token blocks;
                                 where Inductor compiles no backward for those, a 128-token
                                 BlockMask with the 64-token lists in a mask_mod)

Timing: the backward alone. The forward runs once outside the timed region; the timed call is
`torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)`: median of CUDA-event timings
after warm-up (bench_common.bench_ms). TF = dense-equivalent TFLOP/s, 2.5x the forward's
4*B*H*S^2*D (the five GEMMs of the backward, as FA2/FA3 count them).

The masks are the ones our CLI builds from the same inputs:
  * random50 / topk: the former bench/attention_bench.py's `make_mask` and generator convention
    (torch.Generator("cuda").manual_seed(S), q, k, v drawn first; the mask is drawn as the
    first masked kind of that script, so random50 is bit for bit attention_bench's);
  * docs12: 12 contiguous documents of equal length (document d starts at d*S//12; or
    `--doc-lengths random`: boundaries from torch.Generator().manual_seed(12)), ids saved as
    .npy for `--predicate "causal@top-left,doc=FILE"`;
  * video10: the former bench/video_bench.py's `make_lists(0.1, False, seed=100)`.
Each is packed with `fragmask pack ... --transposed` into --workdir (the backward's file, with the
transposed lists) and its inputs (q, k, v, dout) saved as safetensors; if `--bin` has
`bench backward`, it is timed as `fragmask bench backward --inputs IN --d-o IN --mask FILE
--json --warmup 10 --iters N` (last stdout line JSON with `ms_median`; IN holds q, k, v and
the same dout as torch's run); otherwise the files stay for that command.

Correctness mode (no timing): given the gradients `fragmask attention --backward` wrote,

    python3 bench/backward_bench.py --check GRADS.safetensors --inputs IN.safetensors \\
        [--mask-npy MASK.npy | --doc-ids IDS.npy | --causal] [--scale X]

compares dq, dk, dv (tensors named dq, dk, dv) against torch autograd through fp32 math
attention with the same bool mask (rows with no visible key give zero gradients, as the
kernel's), per head, GQA included (dk, dv summed over each group's query heads); prints max
abs error, max abs error / max |reference| and relative L2 per tensor, and exits 1 above
--tol (relative L2).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

D = 128
VIDEO_H, VIDEO_N, VIDEO_BS = 12, 23296, 64


def bwd_flops(b, h, sq, sk, d):
    return 2.5 * 4.0 * b * h * sq * sk * d


def bench_ms(fn, iters):
    return bench_common.bench_ms(fn, warmup=5, iters=iters)


def grad_fn(out, q, k, v):
    """The timed backward: grads of `out` (forward already run) with a fixed dout."""
    dout = torch.randn_like(out)

    def fn():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    return fn, dout


def qkv(shape, gen):
    return [torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3)]


def attention_bench_mask(kind, s, gen):
    """The former attention_bench.py's make_mask (the same generator draws)."""
    if kind == "random50":
        return torch.rand(s, s, device="cuda", generator=gen) < 0.5
    idx = torch.rand(s, s, device="cuda", generator=gen).topk(s // 8, dim=1).indices
    m = torch.zeros(s, s, dtype=torch.bool, device="cuda")
    m.scatter_(1, idx, True)
    return m


def doc_ids(s, lengths="equal", docs=12, seed=12):
    """[S] int32 document ids 0..docs-1, contiguous documents: equal lengths (document d
    starts at d*S//docs), or random lengths (boundaries from torch.Generator seed 12)."""
    if lengths == "equal":
        cuts = torch.tensor([d * s // docs for d in range(1, docs)])
    else:
        g = torch.Generator().manual_seed(seed)
        cuts = torch.randperm(s - 1, generator=g)[: docs - 1].add(1).sort().values
    ids = torch.zeros(s, dtype=torch.int32)
    ids[cuts] = 1
    return ids.cumsum(0).to(torch.int32)


def dense_from_docs(ids):
    ids = ids.cuda()
    s = ids.numel()
    q = torch.arange(s, device="cuda")
    return (ids[:, None] == ids[None, :]) & (q[:, None] >= q[None, :])


def video_lists(frac=0.1, seed=100):
    """The former video_bench.py's make_lists(0.1, False, seed=100): write-up 002's lists,
    H=12 heads of 364 query blocks keeping a random 10% of the key blocks."""
    heads, nb = 12, 23296 // 64
    g = torch.Generator().manual_seed(seed)
    k = max(1, round(frac * nb))
    scores = torch.rand(heads, nb, nb, generator=g)
    index = scores.topk(k, dim=-1).indices.sort(dim=-1).values.to(torch.int32)
    num = torch.full((heads, nb), k, dtype=torch.int32)
    return index, num, None


def run(cmd, timeout=900):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-1500:]}")
    return res.stdout


def has_bench_backward(binary):
    if not binary or not os.path.exists(binary):
        return False
    res = subprocess.run([binary, "bench", "backward", "--help"], capture_output=True, text=True)
    return res.returncode == 0


def fragmask_backward(args, inputs, mask_file, extra, binary=None):
    cmd = [binary or args.bin, "bench", "backward", "--inputs", inputs, "--d-o", inputs, "--json",
           "--warmup", "10", "--iters", str(args.iters)] + (["--mask", mask_file] if mask_file else []) + extra
    out = run(cmd)
    return json.loads(out.strip().splitlines()[-1])


def save_inputs(path, q, k, v, dout):
    from safetensors.torch import save_file

    save_file({"q": q.detach().contiguous().cpu(), "k": k.detach().contiguous().cpu(),
               "v": v.detach().contiguous().cpu(), "do": dout.contiguous().cpu()}, path)


def workloads(args):
    """(name, S, H, builder) in the order of issue 13's table."""
    sizes = [int(x) for x in args.sizes.split(",")]
    out = []
    for s in sizes:
        out.append(("none", s, 16))
        out.append(("random50", s, 16))
    if 8192 in sizes:
        out.append(("docs12", 8192, 16))
    if 16384 in sizes:
        out.append(("topk", 16384, 16))
    out.append(("video10", VIDEO_N, VIDEO_H))
    only = set(filter(None, args.only.split(",")))
    return [w for w in out if not only or w[0] in only]


# FlexAttention kernel options tried in turn for the write-up 002 workload (64-token mask blocks).
VIDEO_FLEX_OPTIONS = [
    {n: 64 for n in ("BLOCK_M", "BLOCK_N", "BLOCK_M1", "BLOCK_N1", "BLOCK_M2", "BLOCK_N2")},
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32,
     "num_warps": 4, "num_stages": 1},
    {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 32, "BLOCK_M2": 32, "BLOCK_N2": 32,
     "num_warps": 4, "num_stages": 1},
]


def video_listed(index, num, heads, nb, device="cuda"):
    """[heads, nb, nb] bool: (head, 64-token query block, 64-token key block) listed."""
    index, num = index.to(device).long(), num.to(device).long()
    keep = torch.arange(index.shape[-1], device=device)[None, None, :] < num[..., None]
    listed = torch.zeros(heads, nb, nb + 1, dtype=torch.bool, device=device)
    # entries past num go to the spare column nb, dropped below
    listed.scatter_(2, torch.where(keep, index, torch.full_like(index, nb)), True)
    return listed[..., :nb].contiguous()


def video_block_mask_128(index, num, heads, s, device="cuda"):
    """FlexAttention BlockMask of write-up 002's 64-token lists at 128-token blocks: a 128
    block is full when its four 64-token pairs are listed, partial when some are (the
    mask_mod applies the 64-token lists inside it), skipped otherwise."""
    from torch.nn.attention.flex_attention import BlockMask

    nb = s // VIDEO_BS
    listed = video_listed(index, num, heads, nb, device)
    quads = listed.view(heads, nb // 2, 2, nb // 2, 2)
    any_, all_ = quads.any(dim=4).any(dim=2), quads.all(dim=4).all(dim=2)
    partial = any_ & ~all_

    def lists(sel):
        n = sel.sum(-1, dtype=torch.int32)[None].contiguous()
        # listed block indices first (a stable sort of "not selected")
        idx = torch.argsort((~sel).to(torch.int8), dim=-1, stable=True).to(torch.int32)
        return n, idx[None].contiguous()

    kv_num, kv_idx = lists(partial)
    full_num, full_idx = lists(all_)

    def mask_mod(b, hh, q_idx, kv_idx):
        return listed[hh, q_idx // VIDEO_BS, kv_idx // VIDEO_BS]

    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=2 * VIDEO_BS,
                                    mask_mod=mask_mod)


def short_error(e):
    text = repr(e)
    return text if len(text) <= 900 else text[:450] + " ... " + text[-450:]


def bench(args):
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

    # One compiled FlexAttention per shape and mask structure: more than dynamo's default
    # cache of 8 across the workloads.
    torch._dynamo.config.cache_size_limit = 64
    flex = torch.compile(flex_attention, dynamic=False)
    ours = has_bench_backward(args.bin)
    os.makedirs(args.workdir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"fragmask bench backward: {'yes' if ours else 'no (masks and inputs written only)'}",
          flush=True)
    rows = []
    for kind, s, h in workloads(args):
        rec = {"workload": kind, "S": s, "H": h}
        try:
            if kind == "video10":
                torch.manual_seed(0)   # the former video_bench.py's q, k, v
                q, k, v = (torch.randn(1, h, s, D, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
            else:
                gen = torch.Generator(device="cuda").manual_seed(s)
                q, k, v = qkv((1, h, s, D), gen)
            for t in (q, k, v):
                t.requires_grad_(True)
            flops = bwd_flops(1, h, s, s, D)
            mask_file, extra, density = None, [], 1.0
            tag = f"{kind}_{s}"
            bm = None
            if kind == "none":
                out = F.scaled_dot_product_attention(q, k, v)
                fn, dout = grad_fn(out, q, k, v)
                rec["sdpa_ms"] = bench_ms(fn, args.iters)
                del out, fn
                out = flex(q, k, v)
            elif kind in ("random50", "topk"):
                mask = attention_bench_mask(kind, s, gen)
                density = mask.float().mean().item()
                buf = mask

                def mask_mod(b, hh, q_idx, kv_idx):
                    return buf[q_idx, kv_idx]

                bm = create_block_mask(mask_mod, None, None, s, s, device="cuda")
                out = flex(q, k, v, block_mask=bm)
                mask_file = pack_dense(args, mask, tag)
            elif kind == "docs12":
                ids = doc_ids(s, args.doc_lengths)
                mask = dense_from_docs(ids)
                density = mask.float().mean().item()
                ids_dev = ids.cuda()

                def mask_mod(b, hh, q_idx, kv_idx):
                    return (ids_dev[q_idx] == ids_dev[kv_idx]) & (q_idx >= kv_idx)

                bm = create_block_mask(mask_mod, None, None, s, s, device="cuda")
                out = flex(q, k, v, block_mask=bm)
                mask_file = pack_docs(args, ids, s, tag)
                del mask
            elif kind == "video10":
                index, num, _ = video_lists()
                nb = s // VIDEO_BS
                density = float(num.float().mean().item()) / nb
                kv_num = num.cuda()[None].contiguous()
                kv_idx = torch.zeros(1, h, nb, nb, dtype=torch.int32, device="cuda")
                kv_idx[..., : index.shape[-1]] = index.cuda()[None]
                zero = torch.zeros_like(kv_num)
                bm = BlockMask.from_kv_blocks(zero, kv_idx, kv_num, kv_idx, BLOCK_SIZE=VIDEO_BS)
                mask_file = pack_blocks(args, index, num, s, tag)
                rec["mask_tile"] = args.video_block
                # Kernel blocks must divide the mask's 64-token blocks. Inductor in torch 2.11
                # finds no backward config for all-64 blocks at this shape (NoValidChoicesError,
                # bench/results/final3-2026-11-23), so smaller backward blocks are tried in turn;
                # the first that compiles and runs is timed and named in the record.
                out = None
                errors = []
                for opts in VIDEO_FLEX_OPTIONS:
                    try:
                        out = flex(q, k, v, block_mask=bm, kernel_options=opts)
                        fn, dout = grad_fn(out, q, k, v)
                        fn()   # compiles the backward
                        rec["flex_options"] = opts
                        break
                    except Exception as e:
                        errors.append(f"{opts}: {short_error(e)[:300]}")
                        out = None
                if out is None:
                    # The anchors' FlexAttention form of these lists (DESIGN.md, write-up 002
                    # prefill): a 128-token BlockMask whose blocks hold any listed 64-token
                    # pair, the 64-token lists applied by a mask_mod.
                    try:
                        bm = video_block_mask_128(index, num, h, s)
                        out = flex(q, k, v, block_mask=bm)
                        fn, dout = grad_fn(out, q, k, v)
                        fn()   # compiles the backward
                        rec["flex_options"] = "128-token BlockMask + mask_mod (64-token lists)"
                    except Exception as e:
                        errors.append(f"128-token BlockMask + mask_mod: {short_error(e)[:300]}")
                        out = None
                if out is None:
                    rec["flex_error"] = " | ".join(errors)
            rec["density"] = density
            if out is None:
                dout = torch.randn(q.shape, device="cuda", dtype=q.dtype)
            else:
                fn, dout = grad_fn(out, q, k, v)
                try:
                    rec["flex_ms"] = bench_ms(fn, args.iters)
                except Exception as e:  # Flex's failure must not hide fragmask's timing
                    rec["flex_error"] = short_error(e)
                del fn, out
            inputs = os.path.join(args.workdir, f"inputs_{tag}.safetensors")
            save_inputs(inputs, q, k, v, dout)
            rec["inputs"], rec["mask_file"] = inputs, mask_file
            if ours:
                try:
                    r = fragmask_backward(args, inputs, mask_file, extra)
                    rec["fragmask_ms"] = r["ms_median"]
                    rec["fragmask_json"] = r
                except Exception as e:  # report, keep going
                    rec["fragmask_error"] = str(e)[-400:]
                if args.ab:  # A/B: --bin and --ab alternately on the same files
                    rec["ab_bin"], rec["ab_rounds_ms"], rec["bin_rounds_ms"] = args.ab, [], []
                    for _ in range(args.ab_rounds):
                        rec["ab_rounds_ms"].append(
                            fragmask_backward(args, inputs, mask_file, extra, args.ab)["ms_median"])
                        rec["bin_rounds_ms"].append(
                            fragmask_backward(args, inputs, mask_file, extra)["ms_median"])
            for sysname in ("sdpa", "flex", "fragmask"):
                ms = rec.get(f"{sysname}_ms")
                if ms:
                    rec[f"{sysname}_tf"] = flops / (ms * 1e-3) / 1e12
            del q, k, v, dout, bm
        except Exception as e:  # one failure must not hide the other numbers
            rec["error"] = short_error(e)
        print(json.dumps({k: v for k, v in rec.items() if k != "fragmask_json"}), flush=True)
        rows.append(rec)
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "backward_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print(f"backward alone, B=1 D={D} bf16, {torch.cuda.get_device_name()}; median of {args.iters} "
          "CUDA-event timings after 5 warm-up; TF dense-equivalent (2.5x forward FLOPs)")
    print(f"{'workload':<10} {'S':>6} {'H':>3} {'density':>8} {'system':<9} {'ms':>9} {'TF':>7} "
          f"{'Flex/x':>7}")
    for r in rows:
        for sysname in ("sdpa", "flex", "fragmask"):
            ms = r.get(f"{sysname}_ms")
            if ms is None:
                continue
            ratio = r["flex_ms"] / ms if r.get("flex_ms") else None
            print(f"{r['workload']:<10} {r['S']:>6} {r['H']:>3} {r.get('density', 1.0):>8.3f} "
                  f"{sysname:<9} {ms:>9.3f} {r[f'{sysname}_tf']:>7.1f} "
                  f"{'-' if ratio is None else f'{ratio:.2f}':>7}")
        if "ab_rounds_ms" in r:
            fmt = lambda xs: " ".join(f"{x:.4f}" for x in xs)
            print(f"{r['workload']:<10} {r['S']:>6} A/B rounds, --bin: {fmt(r['bin_rounds_ms'])}; "
                  f"--ab {r['ab_bin']}: {fmt(r['ab_rounds_ms'])}")
        if "error" in r:
            print(f"{r['workload']:<10} {r['S']:>6} ERROR {r['error'][:200]}")
        if "flex_error" in r:
            print(f"{r['workload']:<10} {r['S']:>6} flex ERROR {r['flex_error'][:200]}")
        if "fragmask_error" in r:
            print(f"{r['workload']:<10} {r['S']:>6} fragmask ERROR {r['fragmask_error'][:200]}")
    if not ours:
        print(f"fragmask: `{args.bin} bench backward` not available; masks (with transposed lists) "
              f"and inputs are in {args.workdir}")
    return 0


def pack(args, cmd_tail, tag, block=None):
    """`fragmask pack ... --transposed` into the workdir (on `block`, default --block); None
    when no binary is given."""
    if not args.bin or not os.path.exists(args.bin):
        return None
    block = block or args.block
    path = os.path.join(args.workdir, f"mask_{tag}.safetensors")
    # A 64-row tile is one warpgroup's accumulator (write-up 002's 64-token blocks).
    wg = ["--warpgroups", "1"] if block.split("x")[0] == "64" else []
    run([args.bin, "pack", *cmd_tail, "--block", block, *wg, "--transposed", "-q", "-o", path])
    return path


def pack_dense(args, mask, tag):
    import numpy as np

    npy = os.path.join(args.workdir, f"dense_{tag}.npy")
    np.save(npy, mask.cpu().numpy())
    try:
        return pack(args, ["--mask", npy], tag)
    finally:
        if not args.keep_dense:
            os.remove(npy)


def pack_docs(args, ids, s, tag):
    import numpy as np

    npy = os.path.join(args.workdir, f"doc_ids_{tag}.npy")
    np.save(npy, ids.numpy().astype(np.int32))
    return pack(args, ["--predicate", f"causal@top-left,doc={npy}", "--seqlen-q", str(s),
                       "--seqlen-k", str(s)], tag)


def pack_blocks(args, index, num, s, tag):
    import numpy as np

    idx_p = os.path.join(args.workdir, f"blocks_idx_{tag}.npy")
    num_p = os.path.join(args.workdir, f"blocks_num_{tag}.npy")
    np.save(idx_p, index.numpy())
    np.save(num_p, num.numpy())
    return pack(args, ["--blocks", idx_p, "--blocks-num", num_p, "--seqlen-q", str(s),
                       "--seqlen-k", str(s)], tag, args.video_block)


# ---- Correctness mode -------------------------------------------------------------------

def reference_grads(q, k, v, dout, mask, scale):
    """dq, dk, dv of fp32 math attention under the bool mask (None = all visible;
    [Sq, Sk] or [H, Sq, Sk]); a row with no visible key has O = 0 and zero gradients.
    One query head at a time; dk, dv summed over each KV head's group (GQA)."""
    b, h, sq, _ = q.shape
    hk = k.shape[1]
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk = torch.zeros(k.shape, dtype=torch.float32, device=q.device)
    dv = torch.zeros(v.shape, dtype=torch.float32, device=q.device)
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hk)
            qf = q[bi, hi].float().requires_grad_(True)
            kf = k[bi, kh].float().requires_grad_(True)
            vf = v[bi, kh].float().requires_grad_(True)
            s = (qf @ kf.T) * scale
            if mask is not None:
                m = mask if mask.dim() == 2 else mask[hi if mask.shape[0] > 1 else 0]
                s = s.masked_fill(~m, float("-inf"))
            mx = s.amax(-1, keepdim=True).detach()
            mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
            e = torch.exp(s - mx)
            den = e.sum(-1, keepdim=True)
            p = e / torch.where(den > 0, den, torch.ones_like(den))
            o = p @ vf
            gq, gk, gv = torch.autograd.grad(o, (qf, kf, vf), dout[bi, hi].float())
            dq[bi, hi] = gq
            dk[bi, kh] += gk
            dv[bi, kh] += gv
            del s, e, p, o
    return dq, dk, dv


def check(args):
    from safetensors.torch import load_file

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inp = {n: t.to(dev) for n, t in load_file(args.inputs).items()}
    grads = {n.lower(): t.to(dev) for n, t in load_file(args.check).items()}
    dout = next((inp[n] for n in ("do", "dout", "d_o", "grad_out") if n in inp), None)
    if dout is None:
        raise SystemExit(f"{args.inputs}: no dO tensor (named do, dout, d_o or grad_out)")
    q, k, v = inp["q"], inp["k"], inp["v"]
    sq, sk = q.shape[2], k.shape[2]
    mask = None
    if args.mask_npy:
        import numpy as np

        mask = torch.from_numpy(np.load(args.mask_npy).astype(bool)).to(dev)
        while mask.dim() > 3:
            if mask.shape[0] != 1:
                raise SystemExit("--mask-npy: batch masks are not supported here")
            mask = mask[0]
    elif args.doc_ids:
        import numpy as np

        mask = dense_from_docs(torch.from_numpy(np.load(args.doc_ids))).to(dev)
    elif args.causal:   # top-left aligned, as `fragmask attention --causal` (diag offset 0)
        mask = torch.ones(sq, sk, dtype=torch.bool, device=dev).tril()
    scale = args.scale if args.scale else q.shape[-1] ** -0.5
    ref = reference_grads(q, k, v, dout, mask, scale)
    worst = 0.0
    print(f"{'tensor':<4} {'max abs err':>12} {'max|ref|':>10} {'max rel':>10} {'rel L2':>10}")
    for name, r in zip(("dq", "dk", "dv"), ref):
        g = grads[name].float()
        if g.shape != r.shape:
            raise SystemExit(f"{name}: shape {tuple(g.shape)}, reference {tuple(r.shape)}")
        err = (g - r).abs()
        ref_max = r.abs().max().item()
        rel_l2 = ((g - r).norm() / r.norm().clamp_min(1e-30)).item()
        worst = max(worst, rel_l2)
        print(f"{name:<4} {err.max().item():>12.3e} {ref_max:>10.3e} "
              f"{err.max().item() / max(ref_max, 1e-30):>10.3e} {rel_l2:>10.3e}")
        if not torch.isfinite(g).all():
            print(f"{name}: {int((~torch.isfinite(g)).sum())} non-finite values")
            worst = float("inf")
    ok = worst <= args.tol
    print(f"worst relative L2 {worst:.3e} ({'PASS' if ok else 'FAIL'} at --tol {args.tol})")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=".carry/fragmask")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "fragmask_bwd"))
    ap.add_argument("--sizes", default="16384,8192")
    ap.add_argument("--only", default="", help="comma-separated workloads (none, random50, "
                    "docs12, topk, video10)")
    ap.add_argument("--block", default="128x128", help="tile of the packed masks")
    ap.add_argument("--video-block", default="64x64",
                    help="video10: tile of its packed lists (default: the write-up's 64-token "
                         "blocks; 128x128 holds them as partial tiles)")
    ap.add_argument("--doc-lengths", choices=("equal", "random"), default="equal",
                    help="docs12: equal documents, or random lengths (the 2026-11-23 run 2)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--ab", help="a second fragmask binary, timed alternately with --bin")
    ap.add_argument("--ab-rounds", type=int, default=3)
    ap.add_argument("--keep-dense", action="store_true", help="keep the dense .npy masks")
    ap.add_argument("--check", help="gradients (dq, dk, dv) written by fragmask attention --backward")
    ap.add_argument("--inputs", help="with --check: q, k, v and dO (do) safetensors")
    ap.add_argument("--mask-npy", help="with --check: dense bool mask [Sq, Sk] or [H, Sq, Sk]")
    ap.add_argument("--doc-ids", help="with --check: document ids [S] (causal within documents)")
    ap.add_argument("--causal", action="store_true",
                    help="with --check: causal, top-left aligned (k <= q, as SDPA's is_causal)")
    ap.add_argument("--scale", type=float, default=None)
    ap.add_argument("--tol", type=float, default=2e-2)
    args = ap.parse_args()
    if args.check:
        if not args.inputs:
            ap.error("--check needs --inputs")
        return check(args)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
