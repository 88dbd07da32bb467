"""Forward kernel time by input/output layout (one H200): the same random data as bhsd
contiguous tensors and as [B, S, H, D] memory (layout="bshd"), fragmask.attention with
CUDA events, 3 alternating rounds of 20 calls. Probe for why the suite's Python rows (bshd)
run faster than its CLI rows (bhsd)."""
import sys
import torch
sys.path.insert(0, sys.argv[1])
import fragmask

def timed(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]

B, H, S = 1, 16, 16384
for D in (128, 64):
    g = torch.Generator(device="cuda").manual_seed(0)
    bshd = [torch.randn((B, S, H, D), device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3)]
    bhsd = [t.transpose(1, 2).contiguous() for t in bshd]
    for causal in (False, True):
        res = {"bhsd": [], "bshd": []}
        for r in range(3):
            order = ("bhsd", "bshd") if r % 2 == 0 else ("bshd", "bhsd")
            for lay in order:
                q, k, v = bhsd if lay == "bhsd" else bshd
                res[lay].append(timed(lambda: fragmask.attention(q, k, v, causal=causal, layout=lay)))
        m = {k: sorted(v)[1] for k, v in res.items()}
        print(f"D={D} causal={causal}: bhsd {m['bhsd']:.4f} ms  bshd {m['bshd']:.4f} ms  bshd/bhsd {m['bshd']/m['bhsd']:.3f}  rounds {res}")
