"""Does lightning_decode's host time per call change once torch.compile (FlexAttention) and
autograd have run in the process? Host time of the whole call and of its pieces, measured
fresh, after compiling and calling Flex, and after autograd steps of fragmask.attention.

    python3 phases.py   (GPU machine; bench/ on sys.path for python_overhead's timers)"""
import gc
import sys

import torch

sys.path.insert(0, "bench")
import fragmask  # noqa: E402
from fragmask import _ops as ops  # noqa: E402
from python_overhead import host_us, overhead, flex, tiny_inputs  # noqa: E402

q, k, v = (torch.randn(1, 64, 1, 96, device="cuda", dtype=torch.bfloat16) for _ in range(3))
kv = torch.zeros(1, 64, 96, 96, device="cuda", dtype=torch.float32)
slope = torch.rand(64, device="cuda", dtype=torch.float32) * 0.1
out = torch.empty_like(v)
fragmask.lightning_decode(q, k, v, kv, slope)
torch.cuda.synchronize()
plan = next(iter(ops._lightning_plans.values()))
gs = ops._get_stream
pieces = {
    "whole call": lambda: fragmask.lightning_decode(q, k, v, kv, slope),
    "whole call out=": lambda: fragmask.lightning_decode(q, k, v, kv, slope, out=out),
    "_plain": lambda: ops._plain(q, k, v),
    "is_compiling": lambda: ops._is_compiling(),
    "empty_like": lambda: torch.empty_like(v),
    "plan.run": lambda: plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                 kv.data_ptr(), slope.data_ptr(), gs(0)),
    "torch add_": lambda: out.add_(1),
}


def measure(phase):
    for rep in range(3):
        row = {n: host_us(fn, n=2000) for n, fn in pieces.items()}
        ev = overhead(pieces["whole call"])
        print(f"{phase:28s} rep {rep}: " + "  ".join(f"{n} {t:.2f}" for n, t in row.items())
              + f"  | events eager {ev['eager_us']:.2f} graph {ev.get('graph_us', 0):.2f}"
              + f"  gc objects {len(gc.get_objects())}", flush=True)


measure("fresh")
tq, tk, tv = tiny_inputs()
flex_attention, create_block_mask = flex()
causal = create_block_mask(lambda b, h, i, j: i >= j, None, None, 256, 256)
for _ in range(3):
    flex_attention(tq, tk, tv, block_mask=causal)
torch.cuda.synchronize()
measure("after Flex compiled")
gq, gk, gv = tiny_inputs(True)
grad = torch.randn_like(tq)
for _ in range(200):
    fragmask.attention(gq, gk, gv, causal=True).backward(grad)
    flex_attention(gq, gk, gv, block_mask=causal).backward(grad)
torch.cuda.synchronize()
measure("after autograd steps")
gc.collect()
measure("after gc.collect")
gc.freeze()
measure("after gc.freeze")
