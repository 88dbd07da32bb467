"""Where lightning_decode's eager host time goes (H=64, D=E=96, B=1, one token): the host
time per call of each piece of its fast path, alone, in a loop of 2000 calls (GPU machine,
the fragmask package importable):

    python3 bench/lightning_host_parts.py [OUT.json]
"""
import json
import os
import sys

import torch

import fragmask
from fragmask import _ops as ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_overhead import host_us  # noqa: E402  (the same CPU timer as the overhead table)

q, k, v = (torch.randn(1, 64, 1, 96, device="cuda", dtype=torch.bfloat16) for _ in range(3))
kv = torch.zeros(1, 64, 96, 96, device="cuda", dtype=torch.float32)
slope = torch.rand(64, device="cuda", dtype=torch.float32) * 0.1
out = torch.empty_like(v)
fragmask.lightning_decode(q, k, v, kv, slope)
torch.cuda.synchronize()
T = torch.Tensor
key = (0, q.shape, k.shape, v.shape, kv.shape, slope.shape, q.dtype, k.dtype, v.dtype, kv.dtype, slope.dtype)
plan = next(iter(ops._lightning_plans.values()))
gs = ops._get_stream
rows = {
  "whole call": lambda: fragmask.lightning_decode(q, k, v, kv, slope),
  "whole call out=": lambda: fragmask.lightning_decode(q, k, v, kv, slope, out=out),
  "python call of a no-op": lambda: (lambda *a, **kw: None)(q, k, v, kv, slope),
  "type checks x5": lambda: type(q) is T and type(k) is T and type(v) is T and type(kv) is T and type(slope) is T,
  "_plain(q,k,v)": lambda: ops._plain(q, k, v),
  "kv.requires_grad": lambda: kv.requires_grad,
  "get_device x5": lambda: (q.get_device(), k.get_device(), v.get_device(), kv.get_device(), slope.get_device()),
  "is_contiguous x5": lambda: (q.is_contiguous(), k.is_contiguous(), v.is_contiguous(), kv.is_contiguous(), slope.is_contiguous()),
  "empty_like(v, memory_format)": lambda: torch.empty_like(v, memory_format=torch.contiguous_format),
  "empty_like(v)": lambda: torch.empty_like(v),
  "v.new_empty(shape)": lambda: v.new_empty((1, 64, 1, 96)),
  "key tuple": lambda: (0, q.shape, k.shape, v.shape, kv.shape, slope.shape, q.dtype, k.dtype, v.dtype, kv.dtype, slope.dtype),
  "key tuple + dict get": lambda: ops._lightning_plans.get((0, q.shape, k.shape, v.shape, kv.shape, slope.shape, q.dtype, k.dtype, v.dtype, kv.dtype, slope.dtype)),
  "data_ptr x6": lambda: (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), kv.data_ptr(), slope.data_ptr()),
  "stream getter": lambda: gs(0),
  "out= checks (dtype, grad, device, contiguity, shape)": lambda: (
      out.dtype is v.dtype and not out.requires_grad and out.get_device() == 0
      and out.is_contiguous() and out.shape == v.shape),
  "plan.run (launch)": lambda: plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), kv.data_ptr(), slope.data_ptr(), gs(0)),
  "torch add_ (a tiny kernel, for scale)": lambda: out.add_(1),
}
res = {name: round(host_us(fn, n=2000), 3) for name, fn in rows.items()}
w = max(map(len, res))
for name, us in res.items():
    print(f"{name:<{w}}  {us:7.3f} us")
if len(sys.argv) > 1:
    json.dump(res, open(sys.argv[1], "w"), indent=1)
