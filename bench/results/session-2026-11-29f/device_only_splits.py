"""Split-KV for masks whose lists stay on the GPU (thirty-eighth session).

A decode-shaped masked forward (few query rows, many keys) with its mask packed on the GPU
and left there: the plan's split count (`AttentionPlan.splits`), its time (the suite's
CUDA-event timer), and its output against the same mask read back (`.to("cpu")`, planned
from host lists). Run once per wheel; prints one line per row.

    python3 device_only_splits.py LABEL [ROW_TEXT]

Head dim 64 rows (192x128 masks) show the split tail too (`AttentionPlan.tail`).
"""
import sys

import torch

sys.path.insert(0, "bench/suite")
import common  # noqa: E402
import fragmask  # noqa: E402

ROWS = [  # name, B, H, Sq, Sk, D, mask kind
    ("sq256.sk65536.random50", 1, 8, 256, 65536, 128, "random"),
    ("sq512.sk32768.random50", 1, 16, 512, 32768, 128, "random"),
    ("sq256.sk65536.blocksparse10", 1, 8, 256, 65536, 128, "blocksparse"),
    ("d64.s16384.random50", 1, 16, 16384, 16384, 64, "random"),
    ("d64.s16384.blocksparse10", 1, 16, 16384, 16384, 64, "blocksparse"),
]


def main():
    label = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    for name, b, h, sq, sk, d, kind in ROWS:
        if only not in name:
            continue
        gen = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16, generator=gen)
        k, v = (torch.randn(b, h, sk, d, device="cuda", dtype=torch.bfloat16, generator=gen)
                for _ in range(2))
        if kind == "random":
            dm = torch.rand(sq, sk, device="cuda", generator=gen) < 0.5
        else:
            keep = torch.rand(-(-sq // 128), -(-sk // 128), device="cuda", generator=gen) < 0.1
            keep[:, 0] = True   # every row sees something
            inside = torch.rand(sq, sk, device="cuda", generator=gen) < 0.5
            dm = keep.repeat_interleave(128, 0)[:sq].repeat_interleave(128, 1)[:, :sk] & inside
        tile = {"head_dim": d} if d != 128 else {}
        on_gpu = fragmask.Mask.from_dense(dm, **tile)
        read_back = fragmask.Mask.from_dense(dm, **tile).to("cpu")
        plans = {key: fragmask.AttentionPlan(q, k, v, m) for key, m in
                 (("gpu", on_gpu), ("host", read_back))}
        outs = {key: p.run(q, k, v) for key, p in plans.items()}
        diff = (outs["gpu"].float() - outs["host"].float()).abs().max().item()
        ms = {key: common.cuda_ms(torch, lambda p=p: p.run(q, k, v), 5, 30)[0]
              for key, p in plans.items()}
        print(f"{label:6s} {name:30s} splits gpu {plans['gpu'].splits:3d} host "
              f"{plans['host'].splits:3d} tail gpu {plans['gpu'].tail} host {plans['host'].tail}  ms gpu {ms['gpu']:.4f} host {ms['host']:.4f}  "
              f"max|gpu-host| {diff:.2e}", flush=True)


if __name__ == "__main__":
    main()
