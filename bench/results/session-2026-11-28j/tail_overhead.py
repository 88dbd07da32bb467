"""Host cost of a split-tail call from Python: the op with its default tail against the
same call with `splits=1` (which turns the default off), head dim 64, S = 16384, H = 16,
no grad and with autograd's forward; bench/python_overhead.py's measures (host_us: CPU
time per call; eager and graph-replay GPU time per call).

usage (GPU machine, fragmask installed): python3 tail_overhead.py"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench"))
import fragmask  # noqa: E402
from python_overhead import host_us, events_ms, graph_ms  # noqa: E402

B, H, S, D = 1, 16, 16384, 64
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
plan = fragmask.AttentionPlan(q, k, v)
print("plan.tail", plan.tail)
rows = []
for name, kw in [("default (tail)", {}), ("splits=1 (no tail)", {"splits": 1})]:
    for grad in (False, True):
        qq, kk, vv = (t.detach().requires_grad_(grad) for t in (q, k, v))

        def call():
            return fragmask.attention(qq, kk, vv, **kw)
        with torch.set_grad_enabled(grad):
            call()
            torch.cuda.synchronize()
            r = {"call": name, "autograd": grad, "host_us": host_us(call, n=50, reps=7),
                 "eager_ms": events_ms(call, n=20, reps=5)}
            if not grad:
                r["graph_ms"] = graph_ms(call, n=10)
        rows.append(r)
        print(json.dumps(r))
print(f"{'call':22s} {'autograd':8s} {'host_us':>8s} {'eager_ms':>9s} {'graph_ms':>9s}")
for r in rows:
    print(f"{r['call']:22s} {str(r['autograd']):8s} {r['host_us']:8.1f} {r['eager_ms']:9.3f} {r.get('graph_ms', float('nan')):9.3f}")
