"""CPU cost of fragmask's Python op layer alone, without a GPU: every eager op path runs
on CPU tensors with the extension's device calls replaced by no-ops (so no kernel is
launched and nothing is computed), which leaves what the wrappers themselves cost per
call: argument checks, plan-cache lookups, tensor allocations (CPU ones here; torch's
CUDA allocator costs more), autograd bookkeeping. Use it to see where a change moves the
wrapper's share of ``bench/python_overhead.py``'s host overhead; it measures nothing
about the GPU path's launches.

usage: python3 bench/python_wrapper_cpu.py [--cprofile NAME]
"""
import argparse
import time

import torch

# CPU tensors pose as tensors of device 0, so the eager fast paths take them.
torch.Tensor.get_device = lambda self: 0

import fragmask  # noqa: E402
from fragmask import _ops  # noqa: E402


class _Plan:
    """The attributes the wrappers read of a plan handle (crates/python/src/plan.rs)."""
    splits = 1
    workspace_floats = (0, 0)
    tail = None  # no split tail
    deterministic = False

    def __init__(self, q=(1, 1, 1, 1)):
        self.lse_shape = [q[0], q[2], q[1]]  # decode's [B, H, Sq]

    def run(self, *args):
        return None

    def run_ptrs(self, *args):
        return None


def stub_extension():
    """The device API's functions as no-ops returning plan stand-ins."""
    _ops._torch()
    _ops._launch = lambda *a: None
    _ops._backward_launch = lambda *a: None
    api = _ops._API
    api["attention_plan"] = lambda *a, **k: _Plan()
    api["attention_backward_plan"] = lambda *a, **k: _Plan()
    api["decode_plan"] = lambda q, *a, **k: _Plan(q)
    api["lightning_plan"] = lambda *a, **k: _Plan()
    _ops._get_stream = lambda device: 0
    _ops._capturing = lambda: False
    _ops._get_device = lambda: 0
    _ops._raw_alloc = lambda nbytes, stream: 1 << 20
    _ops._raw_delete = lambda ptr: None
    # Plan constructors check that templates are CUDA tensors.
    _ops._spec = lambda t, n, w: (tuple(t.shape), tuple(t.stride()), t.dtype, 0)
    _ops._check_tensors = lambda *a: None


def us_per_call(fn, n=500, reps=25):
    """Best of reps of the mean wall time of n calls, in µs (many short reps: on a
    shared machine the best of them is the one no other process interrupted)."""
    for _ in range(100):
        fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n / 1e3)
    return best


def _noop(*args, **kwargs):
    return None


def calls():
    bf = torch.bfloat16
    q, k, v = (torch.randn(1, 2, 256, 128).to(bf) for _ in range(3))
    qg, kg, vg = (torch.randn(1, 2, 16, 128).to(bf).requires_grad_() for _ in range(3))
    grad = torch.randn(1, 2, 16, 128).to(bf)

    def step():
        for t in (qg, kg, vg):
            t.grad = None
        fragmask.attention(qg, kg, vg, causal=True).backward(grad)

    plan = fragmask.AttentionPlan(q, k, v, causal=True)
    dq = torch.randn(1, 1, 8, 128).to(bf)
    kc, vc = (torch.randn(1, 256, 8, 128).to(bf) for _ in range(2))
    dplan = fragmask.DecodePlan(dq, kc, vc)
    lq, lk, lv = (torch.randn(1, 64, 1, 96).to(bf) for _ in range(3))
    state, slope = torch.zeros(1, 64, 96, 96), torch.rand(64)
    lout = torch.empty_like(lv)
    return {
        "attention no-grad": lambda: fragmask.attention(q, k, v, causal=True),
        "AttentionPlan.run": lambda: plan.run(q, k, v),
        "attention autograd forward": lambda: fragmask.attention(qg, kg, vg, causal=True),
        "attention autograd forward+backward": step,
        "decode": lambda: fragmask.decode(dq, kc, vc),
        "DecodePlan.run": lambda: dplan.run(dq, kc, vc),
        "lightning_decode": lambda: fragmask.lightning_decode(lq, lk, lv, state, slope),
        "lightning_decode (out=)": lambda: fragmask.lightning_decode(lq, lk, lv, state, slope,
                                                                     out=lout),
        "floor: a Python call of the same arguments": lambda: _noop(lq, lk, lv, state, slope),
        "floor: torch.empty_like": lambda: torch.empty_like(lv),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cprofile", help="profile one call by name with cProfile")
    args = ap.parse_args()
    stub_extension()
    table = calls()
    if args.cprofile:
        import cProfile
        import pstats

        fn = table[args.cprofile]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            fn()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(20)
        return
    print("| call (extension stubbed, CPU tensors) | µs per call |")
    print("|---|---|")
    for name, fn in table.items():
        print(f"| {name} | {us_per_call(fn, n=100 if 'backward' in name else 500):.2f} |")


if __name__ == "__main__":
    main()
