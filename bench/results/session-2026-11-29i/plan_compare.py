"""Python's block-sparse forward against the CLI's on one mask (next/README item 5).

For head dims 128 and 256 at S=16384 H=16: the mask of the suite's row (blocksparse 10%), packed on
the GPU and left there, and the same mask read back (host lists); each plan's kernel, splits, tail
and order, and its run time; then the CLI on the same mask (saved .npy) and on its own synthetic
draw. usage: plan_compare.py BIN OUTDIR"""
import json, os, subprocess, sys
import numpy as np
import torch
import fragmask

BIN, OUTD = sys.argv[1:3]
dev = torch.device("cuda")
S, H = 16384, 16


def cuda_ms(fn, warm=5, iters=30):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


rows = []
gen = torch.Generator(device=dev).manual_seed(0)
nq = S // 128
keep = torch.rand(nq, nq, device=dev, generator=gen) < 0.1
inside = torch.rand(S, S, device=dev, generator=gen) < 0.5
dm = (keep.repeat_interleave(128, 0).repeat_interleave(128, 1) & inside).contiguous()
npy = os.path.join("/tmp", "bs10.npy")
np.save(npy, dm.cpu().numpy()[None, None])
for d, block in ((128, None), (256, (128, 80))):
    q = torch.randn(1, H, S, d, device=dev, dtype=torch.bfloat16)
    k = torch.randn_like(q); v = torch.randn_like(q)
    tile = {"block": block} if block else {"head_dim": d}
    for how in ("device", "read back"):
        m = fragmask.Mask.from_dense(dm, **tile)
        if how == "read back":
            m.to("cpu")
        m = m.to(dev)
        plan = fragmask.AttentionPlan(q, k, v, m)
        ms_plan = cuda_ms(lambda: plan.run(q, k, v))
        ms_op = cuda_ms(lambda: fragmask.attention(q, k, v, m))
        rows.append(dict(d=d, how=how, kernel=plan.kernel, splits=plan.splits, tail=plan.tail,
                         largest_first=plan.largest_first, plan_ms=ms_plan, op_ms=ms_op))
        print(json.dumps(rows[-1]), flush=True)
    for how, flags in (("CLI same mask", ["--dense-mask", npy]),
                       ("CLI synthetic", ["--synthetic-mask", "blocksparse:0.1:0.5"])):
        cmd = [BIN, "bench", "attention", "--random", f"1,{H},{H},{S},{S},{d}", "--json",
               "--warmup", "5", "--iters", "30"] + flags
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode:
            rows.append(dict(d=d, how=how, error=(r.stderr or r.stdout)[-300:]))
        else:
            j = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append(dict(d=d, how=how, kernel=j.get("kernel"), plan_ms=j.get("ms_median"),
                             splits=j.get("splits"), tail=j.get("tail")))
        print(json.dumps(rows[-1]), flush=True)
json.dump(rows, open(os.path.join(OUTD, "plan_compare.json"), "w"), indent=1)
print("\n| d | how | kernel | splits | tail | largest first | plan ms | op ms |")
for r in rows:
    print(f"| {r['d']} | {r['how']} | {r.get('kernel')} | {r.get('splits')} | {r.get('tail')} | "
          f"{r.get('largest_first')} | {r.get('plan_ms')} | {r.get('op_ms')} |")
