"""Shared pieces of the benchmark suite: timing, the copy roof, rows and peer status.

Every GPU time is the median of CUDA-event-timed calls after untimed warm-up calls, on
torch's current stream of one device. A routine returns one row per system; a system that
cannot run a workload (missing package, unsupported mask, error) still gets a row, with
``status`` saying why, so no peer is ever silently dropped.
"""
import math
import statistics
import time

# Row statuses: "ok" has a time; the others carry a reason in "note".
OK, MISSING, UNSUPPORTED, FAILED = "ok", "missing", "unsupported", "failed"


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def cuda_ms(torch, fn, warmup=5, iters=20, inner=1):
    """Median over ``iters`` of the CUDA-event time of ``inner`` back-to-back calls of
    ``fn``, divided by ``inner``, after ``warmup`` untimed calls; also the p10/p90."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / inner)
    times.sort()
    return times[len(times) // 2], times[len(times) // 10], times[(len(times) * 9) // 10]


def host_us(fn, calls=200, reps=9):
    """Median over ``reps`` of the host (perf_counter) time per call of ``calls`` calls, µs."""
    fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return median(out)


_ROOF_CACHE = {}


def copy_ms(torch, nbytes, warmup=5, iters=20):
    """A device-to-device copy of ``nbytes`` (read + write), median ms: the roof of a
    workload that must read those bytes once. Cached per size for the run."""
    nbytes = max(int(nbytes), 1 << 20)
    if nbytes not in _ROOF_CACHE:
        a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        _ROOF_CACHE[nbytes] = cuda_ms(torch, lambda: b.copy_(a), warmup, iters)[0]
        del a, b
    return _ROOF_CACHE[nbytes]


def row(system, status=OK, ms=None, note="", **extra):
    """One measured system of one workload."""
    r = {"system": system, "status": status, "ms": ms, "note": note}
    r.update(extra)
    return r


def attempt(system, fn):
    """Runs ``fn() -> row`` and turns an exception into a ``failed`` row (reason kept)."""
    try:
        return fn()
    except Exception as e:  # one peer's failure must not hide the others
        msg = f"{type(e).__name__}: {e}".replace("\n", " ")
        return row(system, FAILED, note=msg[:300])


def attention_flops(b, h, sq, sk, d, backward=False):
    """Dense-equivalent FLOPs of attention: 4·B·H·Sq·Sk·D for the forward (QKᵀ and PV),
    2.5× that for the backward, whatever the mask keeps (a masked row's TFLOP/s is the
    dense work divided by its time)."""
    f = 4.0 * b * h * sq * sk * d
    return f * 2.5 if backward else f


def tflops(flops, ms):
    return None if not ms or ms <= 0 or math.isnan(ms) else flops / (ms * 1e-3) / 1e12
