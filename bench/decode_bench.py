"""Split-KV decode (issue 11) side by side on one GPU, in one run: torch SDPA,
FlexAttention (flex_attention compiled, which takes its decode path for a short query),
and `fragmask bench decode --preset issue11`, each as a fraction of a 1 GiB
device-to-device copy measured in the same run (bytes read plus written).

Before timing, fragmask's output is compared with torch SDPA (fp32, on the gathered
keys with an explicit bottom-right causal / window mask) on files written here:
contiguous and paged (shuffled pages), GQA, MQA, causal Sq > 1.

usage: python3 bench/decode_bench.py --fragmask target/release/fragmask [--no-flex] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import tempfile

import torch
import torch.nn.functional as F

WORKLOADS = [  # (name, B, H, Hkv, Sk); q = 1, D = 128, bf16
    ("B=16 H=32/8 Sk=8192", 16, 32, 8, 8192),
    ("B=1 H=32/8 Sk=65536", 1, 32, 8, 65536),
    ("B=64 H=32/8 Sk=4096", 64, 32, 8, 4096),
    ("B=8 H=64/8 Sk=16384", 8, 64, 8, 16384),
]


def median_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def copy_roof(warmup, iters):
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), warmup, iters)
    return ms, 2 * n / (ms * 1e6)


def reference(q, k, v, table, lens, page, sq, causal, left):
    """fp32 SDPA per request on the gathered keys, with an explicit bottom-right mask."""
    b_n, _, h, d = q.shape
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for b in range(b_n):
        n = int(lens[b])
        if page is None:
            kb, vb = k[b, :n], v[b, :n]
        else:
            pages = table[b, : (n + page - 1) // page].long()
            kb = k[pages].reshape(-1, k.shape[2], d)[:n]
            vb = v[pages].reshape(-1, v.shape[2], d)[:n]
        pos = n - sq + torch.arange(sq, device=q.device)[:, None]
        key = torch.arange(n, device=q.device)[None, :]
        mask = torch.ones(sq, n, dtype=torch.bool, device=q.device)
        if causal:
            mask &= key <= pos
        if left is not None:
            mask &= key >= pos - left
        qb = q[b].transpose(0, 1).float()  # [H, Sq, D]
        kk = kb.transpose(0, 1).float()
        vv = vb.transpose(0, 1).float()
        g = h // kk.shape[0]
        kk = kk.repeat_interleave(g, 0)
        vv = vv.repeat_interleave(g, 0)
        if n == 0:
            continue
        # Rows with no visible key: SDPA gives NaN; fragmask gives 0.
        o = F.scaled_dot_product_attention(qb, kk, vv, attn_mask=mask)
        o = torch.nan_to_num(o, nan=0.0)
        out[b] = o.transpose(0, 1)
    return out


def check_against_sdpa(fragmask, workdir):
    from safetensors.torch import load_file, save_file

    cases = [  # (B, Sq, H, Hkv, Sk, D, page, causal, left)
        (3, 1, 32, 8, 777, 128, None, False, None),
        (3, 1, 32, 8, 777, 128, 16, False, None),
        (2, 4, 16, 2, 500, 128, 16, True, None),
        (2, 1, 8, 1, 300, 64, 1, False, None),
        (2, 3, 4, 4, 333, 256, 64, True, 40),
        (2, 16, 32, 8, 1024, 128, 256, True, None),
    ]
    ok = True
    for i, (b, sq, h, hkv, sk, d, page, causal, left) in enumerate(cases):
        gen = torch.Generator(device="cuda").manual_seed(i)
        q = torch.rand(b, sq, h, d, device="cuda", generator=gen).mul(2).sub(1).bfloat16()
        lens = torch.randint(sq, sk + 1, (b,), device="cuda", generator=gen).int()
        lens[0] = sk
        tensors = {"q": q, "seqlens_k": lens}
        table = None
        if page is None:
            k = torch.rand(b, sk, hkv, d, device="cuda", generator=gen).mul(2).sub(1).bfloat16()
            v = torch.rand(b, sk, hkv, d, device="cuda", generator=gen).mul(2).sub(1).bfloat16()
        else:
            max_pages = (sk + page - 1) // page
            num_pages = b * max_pages
            k = torch.rand(num_pages, page, hkv, d, device="cuda", generator=gen).mul(2).sub(1).bfloat16()
            v = torch.rand(num_pages, page, hkv, d, device="cuda", generator=gen).mul(2).sub(1).bfloat16()
            table = torch.randperm(num_pages, device="cuda", generator=gen).int().reshape(b, max_pages)
            tensors["block_table"] = table
        tensors["k_cache"], tensors["v_cache"] = k, v
        path = os.path.join(workdir, f"case{i}.safetensors")
        out = os.path.join(workdir, f"out{i}.safetensors")
        save_file({n: t.contiguous().cpu() for n, t in tensors.items()}, path)
        cmd = [fragmask, "decode", "--inputs", path, "--out", out]
        if causal:
            cmd.append("--causal")
        if left is not None:
            cmd += ["--window-left", str(left)]
        subprocess.run(cmd, check=True, capture_output=True)
        got = load_file(out)["o"].cuda().float()
        ref = reference(q, k, v, table, lens, page, sq, causal, left)
        err = ((got - ref).norm() / ref.norm()).item()
        passed = err < 1.6e-2
        ok &= passed
        print(f"vs SDPA: B={b} Sq={sq} H={h}/{hkv} Sk={sk} D={d} page={page} causal={causal} left={left}: "
              f"rel. error {err:.2e} {'PASS' if passed else 'FAIL'}", flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fragmask", required=True)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as workdir:
        checks_ok = True if args.no_check else check_against_sdpa(args.fragmask, workdir)
        fm_json = os.path.join(workdir, "fm.json")
        fm = subprocess.run([args.fragmask, "bench", "decode", "--preset", "issue11", "--json", fm_json],
                            check=True, capture_output=True, text=True)
        print(fm.stdout, flush=True)
        with open(fm_json) as f:
            fm_rows = {r["workload"]: r for r in json.load(f)["rows"]}
    roof_ms, roof = copy_roof(args.warmup, args.iters)
    print(f"device {torch.cuda.get_device_name()}: torch copy roof {roof:.0f} GB/s", flush=True)
    flex = None
    if not args.no_flex:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    rows = []
    d = 128
    for name, b, h, hkv, sk in WORKLOADS:
        q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, hkv, sk, d, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * k.numel() * 2 + 2 * q.numel() * 2
        sdpa_ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), args.warmup, args.iters)
        flex_ms = None
        if flex is not None:
            try:
                flex_ms = median_ms(lambda: flex(q, k, v, enable_gqa=True), args.warmup, args.iters)
            except Exception as e:  # a compile failure is reported, not fatal
                print(f"flex {name}: {type(e).__name__}: {e}", flush=True)
        fm_row = fm_rows.get(name, {})
        row = {"workload": name, "bytes": nbytes, "roof_gbps": roof,
               "sdpa_ms": sdpa_ms, "sdpa_of_roof": nbytes / (sdpa_ms * 1e6) / roof,
               "flex_ms": flex_ms, "flex_of_roof": None if flex_ms is None else nbytes / (flex_ms * 1e6) / roof,
               "fragmask_ms": fm_row.get("ms"), "fragmask_graph_ms": fm_row.get("graph_ms"),
               "fragmask_of_roof": None if "ms" not in fm_row else nbytes / (fm_row["ms"] * 1e6) / roof,
               "fragmask_splits": fm_row.get("splits")}
        rows.append(row)
        del q, k, v
        torch.cuda.empty_cache()
    fmt = lambda x, p=4: "-" if x is None else f"{x:.{p}f}"
    print("| workload | roof ms | SDPA ms | Flex ms | fragmask ms (splits) | SDPA / Flex / fragmask of roof |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        roof_row_ms = r["bytes"] / (r["roof_gbps"] * 1e6)
        print(f"| {r['workload']} | {roof_row_ms:.4f} | {fmt(r['sdpa_ms'])} | {fmt(r['flex_ms'])} | "
              f"{fmt(r['fragmask_ms'])} ({r['fragmask_splits']}) | {fmt(r['sdpa_of_roof'], 2)} / "
              f"{fmt(r['flex_of_roof'], 2)} / {fmt(r['fragmask_of_roof'], 2)} |")
    print("checks vs SDPA:", "all passed" if checks_ok else "FAILED")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "roof_gbps": roof, "rows": rows,
                       "checks_ok": checks_ok}, f, indent=1)


if __name__ == "__main__":
    main()
