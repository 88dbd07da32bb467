"""Where the host time of ``decode`` and of the autograd backward goes (GPU machine, the
fragmask package importable), beside torch's own floors, with the overhead table's CPU
timer: each piece alone in a loop of calls.

- decode: 1 token, 8 heads over a 256-key cache (the overhead table's shape): the whole
  eager call, ``DecodePlan.run``, the plan lookup, the allocations and the planned
  launch alone.
- backward: B=1 H=2 S=256 D=128 causal (the overhead table's shape): one forward's graph
  run backward again and again (``retain_graph``), fragmask's, SDPA's and kernel-free
  ``torch.autograd.Function``s' of one input (the overhead table's floor) and of q, k, v
  (three gradients accumulated, as an attention's), with ``.grad`` accumulating (the
  overhead table's loop) and reset to None before each call; and the pieces of
  fragmask's backward (the planned launch of its three kernels, three allocations).

    python3 bench/call_host_parts.py [OUT.json]
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

import fragmask
from fragmask import _ops as ops

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The overhead table's CPU timer and its kernel-free floors (one input; q, k, v).
from python_overhead import host_us, _Bare as Bare1, _Bare3 as Bare3  # noqa: E402


def rows():
    r = {}
    bf = torch.bfloat16
    # --- decode
    dq = torch.randn(1, 1, 8, 128, device="cuda", dtype=bf)
    kc, vc = (torch.randn(1, 256, 8, 128, device="cuda", dtype=bf) for _ in range(2))
    fragmask.decode(dq, kc, vc)
    dplan = fragmask.DecodePlan(dq, kc, vc)
    dplan.run(dq, kc, vc)
    torch.cuda.synchronize()
    r["decode: whole call"] = lambda: fragmask.decode(dq, kc, vc)
    if hasattr(ops, "_KEEP_STREAM_BLOCKS"):   # builds that keep a workspace per stream
        ops._KEEP_STREAM_BLOCKS = False
        r["decode: whole call, a workspace block per call"] = round(
            host_us(lambda: fragmask.decode(dq, kc, vc), n=1000), 3)
        ops._KEEP_STREAM_BLOCKS = True
    r["decode: DecodePlan.run"] = lambda: dplan.run(dq, kc, vc)
    dev = dq.get_device()
    if hasattr(ops, "_decode_hit"):
        r["decode: _decode_hit (key + lookup)"] = lambda: ops._decode_hit(
            dev, dq.shape, kc.shape, vc.shape, dq.dtype, kc.dtype, vc.dtype, None, None, None,
            0, -1, -1, 0.0, 0, 0)
    r["decode: empty_like(q, contiguous)"] = lambda: torch.empty_like(
        dq, memory_format=torch.contiguous_format)
    stream = torch.cuda.current_stream().cuda_stream
    alloc = torch._C._cuda_cudaCachingAllocator_raw_alloc
    free = torch._C._cuda_cudaCachingAllocator_raw_delete
    r["raw block alloc+delete"] = lambda: free(alloc(4 * 32768 + 4096, stream))
    handle = getattr(dplan, "_hit", None)
    handle = handle[0] if isinstance(handle, tuple) else getattr(dplan, "_handle", None)
    out = torch.empty_like(dq)
    ws = dplan._ws_ptrs or (out.data_ptr(), out.data_ptr())
    ptrs = (dq.data_ptr(), kc.data_ptr(), vc.data_ptr(), out.data_ptr(), 0, ws[0], ws[1], 0, 0,
            0, (0, 0, 0), stream)
    if handle is not None:
        try:
            handle.run(*ptrs)
            r["decode: planned launch alone (handle.run)"] = lambda: handle.run(*ptrs)
        except TypeError as e:   # another build's signature
            print("decode handle.run:", e)
    r["decode: splits"] = dplan.splits

    # --- backward
    q, k, v = (torch.randn(1, 2, 256, 128, device="cuda", dtype=bf, requires_grad=True)
               for _ in range(3))
    grad = torch.randn_like(q)
    fwd = {
        "fragmask": lambda: fragmask.attention(q, k, v, causal=True),
        "SDPA": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "floor, one input": lambda: Bare1.apply(q),
        "floor, q k v": lambda: Bare3.apply(q, k, v),
    }
    for name, f in fwd.items():
        out = f()
        out.backward(grad, retain_graph=True)

        def again(out=out):
            out.backward(grad, retain_graph=True)

        def fresh(out=out):
            q.grad = k.grad = v.grad = None
            out.backward(grad, retain_graph=True)

        r[f"backward {name} (.grad accumulating)"] = again
        r[f"backward {name} (.grad None)"] = fresh
        r[f"forward {name}"] = f
    q.grad = k.grad = v.grad = None
    r["grads to None alone"] = lambda: setattr(q, "grad", None) or setattr(
        k, "grad", None) or setattr(v, "grad", None)
    r["empty_like x3"] = lambda: (torch.empty_like(q, memory_format=torch.contiguous_format),
                                  torch.empty_like(k, memory_format=torch.contiguous_format),
                                  torch.empty_like(v, memory_format=torch.contiguous_format))
    if hasattr(ops, "_fwd_plans") and ops._fwd_plans:
        entry = next(e for e in ops._fwd_plans.values() if e[ops._BWD][6])
        bwd = next(iter(entry[ops._BWD][6].values()))
        with torch.no_grad():
            o, lse = fragmask.attention(q, k, v, causal=True, return_lse=True)
        dq_, dk_, dv_ = (torch.empty_like(t) for t in (q, k, v))
        args = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                grad.data_ptr(), dq_.data_ptr(), dk_.data_ptr(), dv_.data_ptr(), stream)
        bwd.run(*args)
        r["backward: planned launch of its kernels alone"] = lambda: bwd.run(*args)
        # q at two addresses in turn (every run patches its four tensor maps either way):
        # on the H100 host of 2026-11-26 a call costs about 2.7 us more than with the
        # same addresses every call, so the patches themselves are not what a launch
        # costs (keeping the last run's maps measured no gain and was not kept).
        q2 = q.detach().clone()
        args2 = (q2.data_ptr(),) + args[1:]
        r["backward: planned launch alone, q's address alternating (x2 calls)"] = (
            lambda: (bwd.run(*args), bwd.run(*args2)))
        fentry = next(iter(ops._fwd_plans.values()))
        o2, lse2 = torch.empty_like(q), torch.empty(1, 2, 256, device="cuda")
        fargs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o2.data_ptr(), lse2.data_ptr(), 0,
                 0, stream)
        if not fentry[ops._WS_BYTES]:    # no split workspace to bring
            fentry[ops._HANDLE].run_ptrs(*fargs)
            r["forward: planned launch alone (one kernel, three maps patched)"] = (
                lambda: fentry[ops._HANDLE].run_ptrs(*fargs))
    r["torch add_ (one tiny kernel, for scale)"] = lambda: grad.add_(0)
    return r


def main():
    res = {}
    for name, fn in rows().items():
        if not callable(fn):
            res[name] = fn
            continue
        try:
            res[name] = round(host_us(fn, n=1000), 3)
        except Exception as e:  # noqa: BLE001  (reported per row)
            res[name] = f"{type(e).__name__}: {e}"[:200]
    w = max(map(len, res))
    for name, us in res.items():
        print(f"{name:<{w}}  {us:>8} {'us' if isinstance(us, float) else ''}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
