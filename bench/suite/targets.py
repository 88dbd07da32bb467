"""Issue 24's targets against the suite's newest results, per device: the section "Issue 24's
targets" of docs/PERF.md (bench/suite/report.py writes it).

Each target reads the fragmask row (Python, CUDA events) of one or two workloads from the
newest run that has them (`report.latest_rows`) and a bound. A ratio of two workloads (the
random mask over no mask) names both runs when they differ; a peer ratio comes from one run.
A target whose rows are missing says so, never passes.
"""
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Target:
    """One target of the issue; `evaluate` reads its rows and compares the value with `bound` by `kind`."""
    what: str       # the issue's words for the row
    kind: str       # "peer": FA4's (or Flex's) time over ours >= bound; "ratio": ours(a) / ours(b) <= bound;
                    # "ms": ours <= bound; "tflops": ours >= bound
    workload: str
    bound: float
    peer: Optional[str] = None   # kind "peer": the peer system
    other: Optional[str] = None  # kind "ratio": the denominator workload


def _rows(best, workload):
    if workload not in best:
        return None, None
    meta, rows = best[workload]
    return meta, {r["system"]: r for r in rows if r.get("status") == "ok"}


def _run(meta):
    return f"{meta.get('commit', '?')}, {meta.get('date', '?')}"


def evaluate(t, best):
    """(value or None, met or None, the run(s) it came from, why missing)."""
    meta, rows = _rows(best, t.workload)
    if meta is None or "fragmask" not in rows:
        return None, None, "", f"no fragmask row of `{t.workload}`"
    ours = rows["fragmask"]
    if t.kind == "peer":
        if t.peer not in rows:
            return None, None, _run(meta), f"no {t.peer} row in that run"
        v = rows[t.peer]["ms"] / ours["ms"]
        return v, v >= t.bound, _run(meta), ""
    if t.kind == "ratio":
        meta_b, rows_b = _rows(best, t.other)
        if meta_b is None or "fragmask" not in rows_b:
            return None, None, _run(meta), f"no fragmask row of `{t.other}`"
        v = ours["ms"] / rows_b["fragmask"]["ms"]
        runs = _run(meta) if _run(meta) == _run(meta_b) else f"{_run(meta)} over {_run(meta_b)} (two runs)"
        return v, v <= t.bound, runs, ""
    if t.kind == "ms":
        return ours["ms"], ours["ms"] <= t.bound, _run(meta), ""
    if t.kind == "tflops":
        v = ours.get("tflops")
        return (v, v >= t.bound, _run(meta), "") if v else (None, None, _run(meta), "no TF/s")
    raise ValueError(f"unknown target kind {t.kind}")


def _fa4(family, name, workload, peer="fa4"):
    return Target(f"{family} {name}: at most FA4's time", "peer", workload, 1.0, peer=peer)


# Issue 24, "Targets" (H100, bf16, B=1; H=16, S=16384, D=128 unless a row says otherwise).
ISSUE24 = [t for fam, p in (("forward", "fwd"), ("backward", "bwd")) for t in (
    _fa4(fam, "no mask", f"{p}.s16384.none"),
    _fa4(fam, "causal", f"{p}.s16384.causal"),
    _fa4(fam, "causal window 1024", f"{p}.s16384.window1024"),
    _fa4(fam, "12 causal documents (FA4 varlen)", f"{p}.s16384.docs12", peer="fa4_varlen"),
    _fa4(fam, "GQA 32:8 causal", f"{p}.gqa.s16384.causal"),
    _fa4(fam, "GQA 64:8 causal", f"{p}.gqa64.s16384.causal"),
    _fa4(fam, "D=64 no mask", f"{p}.d64.s16384.none"),
    _fa4(fam, "D=64 causal", f"{p}.d64.s16384.causal"),
    _fa4(fam, "D=256 no mask", f"{p}.d256.s16384.none"),
    _fa4(fam, "D=256 causal", f"{p}.d256.s16384.causal"),
    Target(f"{fam} random 50%: at least 1.6x Flex's speed", "peer", f"{p}.s16384.random50", 1.6, peer="flex"),
)] + [
    Target("forward no mask: at least 700 TF/s", "tflops", "fwd.s16384.none", 700.0),
    Target("backward no mask: at least 640 TF/s", "tflops", "bwd.s16384.none", 640.0),
    Target("forward random 50%: at most 1.05x our no-mask time", "ratio", "fwd.s16384.random50", 1.05,
           other="fwd.s16384.none"),
    Target("backward random 50%: at most 1.10x our no-mask time", "ratio", "bwd.s16384.random50", 1.10,
           other="bwd.s16384.none"),
    Target("write-up 002 forward, 10% of 64-token blocks: at most 0.65 ms", "ms", "fwd.wu002.blocks10", 0.65),
    Target("write-up 002 forward, 50%: at most 3.0 ms", "ms", "fwd.wu002.blocks50", 3.0),
    Target("write-up 002 backward, 10%: at most 2.0 ms", "ms", "bwd.wu002.blocks10", 2.0),
    Target("write-up 002 backward, 50%: at most 9.0 ms", "ms", "bwd.wu002.blocks50", 9.0),
]

_UNITS = {"peer": "{:.3f}x", "ratio": "{:.3f}x", "ms": "{:.3f} ms", "tflops": "{:.0f} TF/s"}
_BOUNDS = {"peer": ">= {:g}", "ratio": "<= {:g}", "ms": "<= {:g} ms", "tflops": ">= {:g} TF/s"}


def table(best, targets=ISSUE24):
    """Markdown lines: one row per target with the value, its bound, met / missed / not measured."""
    out = ["| target | value | bound | status | run (commit, date) |", "|---|---|---|---|---|"]
    met = missed = unmeasured = 0
    for t in targets:
        v, ok, runs, why = evaluate(t, best)
        if v is None:
            unmeasured += 1
            out.append(f"| {t.what} | | {_BOUNDS[t.kind].format(t.bound)} | not measured ({why}) | {runs} |")
            continue
        met += ok
        missed += not ok
        out.append(f"| {t.what} | {_UNITS[t.kind].format(v)} | {_BOUNDS[t.kind].format(t.bound)} | "
                   f"{'met' if ok else '**missed**'} | {runs} |")
    return out, (met, missed, unmeasured)
