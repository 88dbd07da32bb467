"""Issue 24's "random 50% over no mask" in one process (thirty-eighth session).

The suite's target row divides two runs' times (PERF.md: d060ee1's random 50% row over
e0931f3's no-mask row). Here the three calls are timed interleaved in one process with the
suite's CUDA-event timer, S=16384 H=16 D=128 bf16: no mask, random 50% packed on the GPU
and left there (list-reading kernels), and the same mask read back (dense tile lists).

    python3 mask_overhead.py ROUNDS
"""
import sys

import torch

sys.path.insert(0, "bench/suite")
import common  # noqa: E402
import fragmask  # noqa: E402

S, H, D = 16384, 16, 128


def main():
    rounds = int(sys.argv[1])
    for backward in (False, True):
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        do = torch.randn_like(q)
        dm = torch.rand(S, S, device="cuda", generator=gen) < 0.5
        masks = {
            "none": None,
            "device": fragmask.Mask.from_dense(dm, transposed=backward),
            "read_back": fragmask.Mask.from_dense(dm, transposed=backward).to("cpu"),
        }
        del dm
        steps = {}
        for key, m in masks.items():
            if backward:
                qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
                out = fragmask.attention(qq, kk, vv, m)

                def step(out=out, qq=qq, kk=kk, vv=vv):
                    return torch.autograd.grad(out, (qq, kk, vv), do, retain_graph=True)
            else:
                def step(m=m):
                    return fragmask.attention(q, k, v, m)
            step()
            steps[key] = step
        times = {key: [] for key in steps}
        order = list(steps)
        for r in range(rounds):
            for key in (order if r % 2 == 0 else order[::-1]):
                times[key].append(common.cuda_ms(torch, steps[key], 5, 20)[0])
        med = lambda xs: sorted(xs)[len(xs) // 2]
        base = times["none"]
        what = "backward" if backward else "forward"
        for key in ("device", "read_back"):
            ratios = sorted(t / b for t, b in zip(times[key], base))
            print(f"{what:8s} random 50% ({key:9s}) {med(times[key]):8.4f} ms over no mask "
                  f"{med(base):8.4f} ms: {med(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f}, "
                  f"{rounds} rounds)", flush=True)
        del masks, steps, q, k, v, do
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
