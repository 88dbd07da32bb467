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


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def median_fields(rows):
    """A copy of the first of ``rows`` (dicts measuring the same thing) whose numeric fields
    are each the median over the rows that hold a number there."""
    out = dict(rows[0])
    for key, value in rows[0].items():
        got = [r[key] for r in rows if _number(r.get(key))]
        if _number(value) and got:
            out[key] = statistics.median(got)
    return out


def median_of_rounds(rounds):
    """One set of rows ({name: {field: value}}) from several rounds of the same rows: each
    numeric field is the median of the rounds that measured it (a round missing the row or
    field, or holding an error there, is left out); other values come from the first round.
    With more than one round, ``"rounds"`` keeps every round."""
    merged = {}
    for name, first in rounds[0].items():
        if not isinstance(first, dict):
            merged[name] = first
            continue
        merged[name] = median_fields([r[name] for r in rounds if isinstance(r.get(name), dict)])
    if len(rounds) > 1:
        merged["rounds"] = [dict(r) for r in rounds]
    return merged


# Every timer (these and the fragmask binary's, through ``--warmup-ms``) keeps warming up
# until this many milliseconds have passed since its first warm-up call, so that the timed
# calls see the clocks a sustained load settles at under the power cap; set once per run
# by run.py's --warmup-ms.
WARMUP_MS = 0


def warm_for(torch, fn, ms, batch=4):
    """Calls ``fn`` in batches of ``batch`` until ``ms`` milliseconds have passed."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        for _ in range(batch):
            fn()
        torch.cuda.synchronize()


def cuda_ms(torch, fn, warmup=5, iters=20, inner=1, head_start=True):
    """Median over ``iters`` of the CUDA-event time of ``inner`` back-to-back calls of
    ``fn``, divided by ``inner``, after ``warmup`` untimed calls and more until
    ``WARMUP_MS`` have passed since the first; also the p10/p90. ``head_start=False``
    times what the GPU sees when the host issues calls as they come (host overhead
    included where it exceeds the GPU time)."""
    start = time.perf_counter()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if WARMUP_MS:   # the rest of WARMUP_MS since the first warm-up call, as the binary's --warmup-ms
        warm_for(torch, fn, WARMUP_MS - (time.perf_counter() - start) * 1e3)
    times = []
    # A GPU-side sleep ahead of each sample lets the host enqueue the start event, the calls
    # and the end event before the GPU reaches them, so the time is the GPU's (a call's host
    # overhead is the "overhead" family's business), about 1 ms of head start per 20 calls.
    sleep_cycles = int(2e6 * max(1.0, inner / 20))
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        if head_start:
            torch.cuda._sleep(sleep_cycles)
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


_COPY = {}
COPY_BYTES = 1 << 29


def copy_bandwidth(torch, warmup=5, iters=20):
    """Bytes per ms of traffic (read + write) of a 512 MiB device-to-device copy, measured
    once per run (far larger than L2, so it is the DRAM rate)."""
    if "bw" not in _COPY:
        a = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
        b = torch.empty_like(a)
        ms = cuda_ms(torch, lambda: b.copy_(a), warmup, iters)[0]
        _COPY["bw"] = 2 * COPY_BYTES / ms
        del a, b
    return _COPY["bw"]


def roof_ms(torch, traffic_bytes):
    """The time a device copy takes to move ``traffic_bytes`` (read + write) at the run's
    copy rate: the floor of a workload that must read (or read and write) those bytes."""
    return traffic_bytes / copy_bandwidth(torch)


def rotation(total_bytes, rotate_mb=256, most=64):
    """How many copies of a workload's inputs to cycle through so that each call reads
    them from DRAM, not L2 (at least ``rotate_mb`` MiB in all)."""
    return max(1, min(most, -(-rotate_mb * (1 << 20) // max(1, int(total_bytes)))))


def row(system, status=OK, ms=None, note="", **extra):
    """One measured system of one workload."""
    r = {"system": system, "status": status, "ms": ms, "note": note}
    r.update(extra)
    return r


def merge_repeats(rounds):
    """One row per (system, variant) from several runs of a workload's routine (each a list
    of rows, the systems in the routine's order, so the runs alternate the systems): where
    every run measured the system, each numeric field is its median over the runs and
    ``repeats_ms`` keeps the runs' times; otherwise the first run's row that is not ok
    stands (a failure or a refusal is reported, never hidden by a later success)."""
    by_key = {}
    for rows in rounds:
        for r in rows:
            by_key.setdefault((r["system"], r.get("variant", "")), []).append(r)
    merged = []
    for got in by_key.values():
        bad = [r for r in got if r["status"] != OK]
        if bad or len(got) < len(rounds):
            merged.append(dict(bad[0] if bad else got[0]))
            continue
        m = median_fields(got)
        m["repeats_ms"] = [r["ms"] for r in got]
        merged.append(m)
    return merged


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
