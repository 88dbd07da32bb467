"""Interleaved A/B of two ``fragmask`` binaries (``run.py --ab A B --interleave``).

Per workload, the ``fragmask bench`` command is built once (any mask file is packed by
build A's binary, so both binaries read identical inputs), then run by A's and B's binary
alternately, back to back, in ABBA order (A B, B A, A B, ...): each pair's two calls are
seconds apart, so GPU clock and thermal drift that spans minutes cancels out of each pair's
ratio B/A. ab.py runs this in one subprocess (``run.py --ab-bins A_BIN B_BIN``) and reads
its rows.

Only the attention routine's ``fragmask_cli`` rows interleave; any other selected row is
written with status ``not_interleaved`` and the reason (it runs in the normal A/B).
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time

SYSTEM = "fragmask_cli"
NOT_INTERLEAVED = "not_interleaved"


class NotInterleavable(Exception):
    """A selected row that has no single CLI command to interleave (the reason)."""


class PairFailed(Exception):
    """A call of one side failed; ``side`` is "A" or "B", the message says why."""

    def __init__(self, side, message):
        super().__init__(f"{side}: {message}")
        self.side = side


def abba(pairs):
    """The side of each call: A B, B A, A B, ... for ``pairs`` pairs."""
    return [side for i in range(pairs) for side in (("A", "B") if i % 2 == 0 else ("B", "A"))]


def command(workload, system, binary, warmup, iters, tmp):
    """The CLI command (a list, ``binary`` first) of one row, valid while ``tmp`` exists.
    Raises NotInterleavable, or attention.CliUnsupported where the CLI lacks the mask."""
    if system != SYSTEM:
        raise NotInterleavable(f"system {system} is not the fragmask binary; "
                               "only fragmask_cli rows interleave (run it without --interleave)")
    if workload["routine"] != "attention":
        raise NotInterleavable(f"routine {workload['routine']!r} rows are not one command "
                               "(run them without --interleave)")
    from .routines import attention
    p = workload["params"]
    kind, arg = attention._spec(p.get("mask", "none"))
    extra = {}
    if attention.needs_host_inputs(kind):
        import torch
        extra = attention.host_inputs(torch, p, kind, arg)
    return attention.cli_command(binary, p, extra, warmup, iters, tmp)


def time_commands(calls, pairs, run_cli):
    """Runs ``calls["A"]`` and ``calls["B"]`` (two commands) in ABBA order. Returns
    ({"A": [ms per pair], "B": [...]}, {"A": first output, "B": first output}); raises
    PairFailed at the first call that fails or reports no time."""
    ms = {"A": [], "B": []}
    first = {}
    for side in abba(pairs):
        try:
            out = run_cli(calls[side])
        except Exception as e:
            raise PairFailed(side, f"{type(e).__name__}: {e}".replace("\n", " ")[:300]) from e
        if not out.get("ms_median"):
            raise PairFailed(side, f"no ms_median in the output: {json.dumps(out)[:200]}")
        ms[side].append(out["ms_median"])
        first.setdefault(side, out)
    return ms, first


def time_pairs(cmd, binaries, pairs, run_cli):
    """Runs ``cmd`` with its binary replaced by ``binaries["A"]`` or ``["B"]`` in ABBA order
    (time_commands). Returns ({"A": [ms per pair], "B": [...]}, {"A": kernel, "B": kernel})."""
    ms, first = time_commands({side: [binaries[side]] + cmd[1:] for side in ("A", "B")},
                              pairs, run_cli)
    return ms, {side: out.get("kernel") for side, out in first.items()}


def rows(selected, systems, binaries, pairs, warmup, iters, budget_s=0, run_cli=None):
    """One row per (selected workload, system in ``systems``), yielded as it is measured:
    status ``ok`` with ``a_ms``/``b_ms`` (one time per pair, pair i's two calls adjacent),
    or ``failed``, ``unsupported``, ``not_interleaved``, ``skipped`` with the reason."""
    from .routines import attention
    run_cli = run_cli or attention.run_cli
    start = time.time()
    for w in selected:
        for system in (s for s in w["systems"] if systems is None or s in systems):
            base = {"kind": "row", "workload": w["name"], "family": w["family"], "variant": "",
                    "system": system}
            if budget_s and time.time() - start > budget_s:
                yield {**base, "status": "skipped", "note": f"time budget of {budget_s} s spent"}
                continue
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    cmd = command(w, system, binaries["A"], warmup, iters, tmp)
                    ms, kernels = time_pairs(cmd, binaries, pairs, run_cli)
                except NotInterleavable as e:
                    yield {**base, "status": NOT_INTERLEAVED, "note": str(e)}
                    continue
                except attention.CliUnsupported as e:
                    yield {**base, "status": "unsupported", "note": str(e)}
                    continue
                except Exception as e:  # a failing side or pack: this row only
                    yield {**base, "status": "failed", "note": f"{type(e).__name__}: {e}"[:300]}
                    continue
            yield {**base, "status": "ok", "a_ms": ms["A"], "b_ms": ms["B"], "pairs": pairs,
                   "kernel_a": kernels.get("A"), "kernel_b": kernels.get("B"),
                   "command": " ".join(cmd[1:])}


def device_name():
    """The first GPU's name from nvidia-smi ('' where there is none)."""
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return (res.stdout.strip().splitlines() or [""])[0].strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def run(args, selected):
    """``run.py --ab-bins A_BIN B_BIN``: writes ``args.output`` (a meta line, then one row per
    selected row as it is measured) and prints one line per row."""
    binaries = dict(zip("AB", (os.path.abspath(x) for x in args.ab_bins)))
    systems = set(args.systems.split(",")) if args.systems else {SYSTEM}
    now = datetime.datetime.now(datetime.timezone.utc)
    meta = {"kind": "meta", "interleaved": True, "commit": args.commit or "", "device": device_name(),
            "date": now.strftime("%Y-%m-%d"), "time": now.strftime("%H:%M:%SZ"),
            "bin_a": binaries["A"], "bin_b": binaries["B"], "pairs": args.rounds,
            "warmup": args.warmup, "warmup_ms": args.warmup_ms, "iters": args.iters, "host": platform.node()}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as out:
        out.write(json.dumps(meta) + "\n")
        for r in rows(selected, systems, binaries, args.rounds, args.warmup, args.iters, args.budget_s):
            out.write(json.dumps(r) + "\n")
            out.flush()
            print(line(r), flush=True)
    return 0


def line(r):
    """One printed line of a row: each side's median and the pairs' B/A, or the status."""
    if r["status"] != "ok":
        return f"{r['workload']:<34} {r['system']:<13} {r['status'].upper()}: {r['note']}"
    ratios = [b / a for a, b in zip(r["a_ms"], r["b_ms"])]
    return (f"{r['workload']:<34} {r['system']:<13} A {statistics.median(r['a_ms']):.4f} ms  "
            f"B {statistics.median(r['b_ms']):.4f} ms  B/A {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)")
