"""Interleaved A/B of one ``fragmask`` binary's flags on suite workloads (GPU machine):

    python3 -m bench.suite.flag_pairs BINARY WORKLOAD_REGEX PAIRS "FLAGS" ["FLAGS" ...]
        [--base "FLAGS"] [--set KEY=VALUE ...]

Per workload the ``fragmask bench`` command is built once (any mask file packed once, as
``run.py --interleave`` does), then each FLAGS variant (appended to it) runs against the
command as it is in ABBA pairs (interleave.time_pairs). ``--base`` flags go on both sides
(the A side is then the command with them). ``--set`` overrides a workload parameter for
this run (``--set mask=blocks64:0.2 --set dim=64``: each selected row runs with it; values
parse as int, float, true/false, else a string). Prints one line per workload and variant:
the medians and B/A (variant over A), the median over pairs and its spread.
"""
import copy
import statistics
import sys
import tempfile

from . import interleave, workloads
from .routines import attention


def parse_value(text):
    """A ``--set`` value: int, float, true/false, else the string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def overrides(pairs):
    """``["key=value", ...]`` as a dict; raises ValueError on an item without ``=``."""
    out = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        out[key] = parse_value(value)
    return out


def with_params(workload, params):
    """A copy of ``workload`` whose params carry ``params``, its name suffixed with them."""
    if not params:
        return workload
    w = copy.deepcopy(workload)
    w["params"].update(params)
    w["name"] += "".join(f" {k}={v}" for k, v in params.items())
    return w


def sides(cmd, base, flags):
    """The A and B commands of one variant: ``cmd + base`` and ``cmd + base + flags``."""
    a = cmd + base.split()
    return {"A": a, "B": a + flags.split()}


def parse_args(argv):
    """``(binary, regex, pairs, variants, base, params)`` of the command line. ``--base`` and
    ``--set`` take the next argument verbatim (flags included); the rest are positional."""
    positional, base, sets = [], "", []
    items = iter(argv)
    for item in items:
        if item in ("--base", "--set"):
            value = next(items, None)
            if value is None:
                raise ValueError(f"{item} needs a value")
            if item == "--base":
                base = value
            else:
                sets.append(value)
        else:
            positional.append(item)
    if len(positional) < 4:
        raise ValueError("usage: BINARY WORKLOAD_REGEX PAIRS FLAGS [FLAGS ...] "
                         "[--base FLAGS] [--set KEY=VALUE ...]")
    binary, regex, pairs, variants = positional[0], positional[1], positional[2], positional[3:]
    if not pairs.isdigit() or int(pairs) < 1:
        raise ValueError(f"PAIRS must be a positive integer, not {pairs!r}")
    return binary, regex, int(pairs), variants, base, overrides(sets)


def main(argv):
    try:
        binary, regex, pairs, variants, base, params = parse_args(argv)
    except ValueError as e:
        sys.exit(f"flag_pairs: {e}")
    _, listed = workloads.load()
    for w in (with_params(w, params) for w in workloads.select(listed, only=regex)):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = interleave.command(w, interleave.SYSTEM, binary, 5, 20, tmp)
            for flags in variants:
                calls = sides(cmd, base, flags)
                ms = {"A": [], "B": []}
                for side in interleave.abba(pairs):
                    out = attention.run_cli(calls[side])
                    ms[side].append(out["ms_median"])
                ratios = [b / a for a, b in zip(ms["A"], ms["B"])]
                print(f"{w['name']:28s} {flags:24s} A {statistics.median(ms['A']):.4f} ms  "
                      f"B {statistics.median(ms['B']):.4f} ms  B/A {statistics.median(ratios):.3f} "
                      f"({min(ratios):.3f}-{max(ratios):.3f}, {pairs} pairs)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
