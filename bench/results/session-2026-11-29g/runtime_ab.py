"""The run-time density check against the host's choice, A/B in one process (thirty-ninth
session; session-2026-11-29f/dense_py_ab.py with block-sparse rows).

The same mask packed on the GPU twice: A is left on the device (its plans run the kernels
that check the packer's partial-tile count when they run: ListEntries::DenseAtRunTime), B is
read back with ``.to("cpu")`` (its plans see the host lists: the dense-list kernels where every
tile is partial, the list-reading ones otherwise). B/A above 1 means the run-time check is
faster. Checks whether A and B give bit-identical outputs (gradients for the backward rows;
the non-deterministic backward's are not bit-reproducible), then times them interleaved
(ABBA) with the suite's CUDA-event timer. Prints one line per row.

    python3 runtime_ab.py ROUNDS [ROW_REGEX]
"""
import re
import sys

import torch

sys.path.insert(0, "bench/suite")
import common  # noqa: E402
import fragmask  # noqa: E402

S, H = 16384, 16
ROWS = [  # name, head dim, mask, backward, deterministic
    ("fwd.s16384.random50", 128, "random", False, False),
    ("fwd.s16384.topk8", 128, "topk", False, False),
    ("fwd.d64.s16384.random50", 64, "random", False, False),
    ("fwd.d256.s16384.random50", 256, "random", False, False),
    ("fwd.s16384.blocksparse10", 128, "blocksparse", False, False),
    ("fwd.d256.s16384.blocksparse10", 256, "blocksparse", False, False),
    ("bwd.s16384.random50", 128, "random", True, False),
    ("bwd.s16384.topk8", 128, "topk", True, False),
    ("bwd.s16384.blocksparse10", 128, "blocksparse", True, False),
    ("bwd.s16384.random50.det", 128, "random", True, True),
    ("bwd.s16384.blocksparse10.det", 128, "blocksparse", True, True),
]


def dense_mask(kind, gen):
    if kind == "random":
        return torch.rand(S, S, device="cuda", generator=gen) < 0.5
    if kind == "blocksparse":   # the suite's: 10% of 128x128 tiles, half the tokens inside
        n = S // 128
        keep = torch.rand(n, n, device="cuda", generator=gen) < 0.1
        inside = torch.rand(S, S, device="cuda", generator=gen) < 0.5
        return keep.repeat_interleave(128, 0).repeat_interleave(128, 1) & inside
    idx = torch.rand(S, S, device="cuda", generator=gen).topk(S // 8, dim=1).indices
    m = torch.zeros(S, S, dtype=torch.bool, device="cuda")
    m.scatter_(1, idx, True)
    return m


def main():
    rounds = int(sys.argv[1])
    only = re.compile(sys.argv[2] if len(sys.argv) > 2 else ".")
    for name, d, kind, backward, det in ROWS:
        if not only.search(name):
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(1, H, S, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        do = torch.randn_like(q)
        dm = dense_mask(kind, gen)
        tile = {} if backward else {"head_dim": d}
        masks = {
            "A": fragmask.Mask.from_dense(dm, transposed=backward, **tile),
            "B": fragmask.Mask.from_dense(dm, transposed=backward, **tile).to("cpu"),
        }
        del dm
        kw = {"deterministic": True} if det else {}
        steps, results = {}, {}
        for key, m in masks.items():
            if backward:
                qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
                out = fragmask.attention(qq, kk, vv, m, **kw)

                def step(out=out, qq=qq, kk=kk, vv=vv):
                    return torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)
            else:
                def step(m=m):
                    return fragmask.attention(q, k, v, m)
            steps[key] = step
            results[key] = step()
        same = all(torch.equal(a, b) for a, b in zip(
            results["A"] if backward else (results["A"],),
            results["B"] if backward else (results["B"],)))
        times = {"A": [], "B": []}
        for r in range(rounds):
            for key in ("AB" if r % 2 == 0 else "BA"):
                times[key].append(common.cuda_ms(torch, steps[key], 5, 20)[0])
        ratios = sorted(b / a for a, b in zip(times["A"], times["B"]))
        med = lambda xs: sorted(xs)[len(xs) // 2]
        print(f"{name:28s} A {med(times['A']):8.4f} ms  B {med(times['B']):8.4f} ms  "
              f"B/A {med(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}, {rounds} pairs)  "
              f"identical={same}", flush=True)
        del masks, steps, results, q, k, v, do
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
