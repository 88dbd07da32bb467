"""Interleaved A/B of one ``fragmask`` binary's flags on suite workloads (GPU machine):

    python3 -m bench.suite.flag_pairs BINARY WORKLOAD_REGEX PAIRS "FLAGS" ["FLAGS" ...]
        [--base "FLAGS"] [--set KEY=VALUE ...] [--output FILE.json --commit LABEL]

Per workload the ``fragmask bench`` command is built once (any mask file packed once, as
``run.py --interleave`` does), then each FLAGS variant (appended to it) runs against the
command as it is in ABBA pairs (interleave.time_commands). ``--base`` flags go on both sides
(the A side is then the command with them). ``--set`` overrides a workload parameter for
this run (``--set mask=blocks64:0.2 --set dim=64``: each selected row runs with it; values
parse as int, float, true/false, else a string). Prints one line per workload and variant:
the medians and B/A (variant over A), the median over pairs and its spread. ``--output``
writes the same as JSON (``commit``, the device the binary names, ``base``, ``set`` and a
row per workload and variant), replaced whole after each row, so a run cut short keeps the
rows it measured.
"""
import copy
import json
import os
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


OPTIONS = ("--base", "--set", "--output", "--commit")


def parse_args(argv):
    """``(binary, regex, pairs, variants, base, params, output, commit)`` of the command
    line. ``--base``, ``--set``, ``--output`` and ``--commit`` take the next argument
    verbatim (flags included); the rest are positional."""
    positional, sets = [], []
    named = {"--base": "", "--output": None, "--commit": None}
    items = iter(argv)
    for item in items:
        if item in OPTIONS:
            value = next(items, None)
            if value is None:
                raise ValueError(f"{item} needs a value")
            if item == "--set":
                sets.append(value)
            else:
                named[item] = value
        else:
            positional.append(item)
    if len(positional) < 4:
        raise ValueError("usage: BINARY WORKLOAD_REGEX PAIRS FLAGS [FLAGS ...] "
                         "[--base FLAGS] [--set KEY=VALUE ...] [--output FILE --commit LABEL]")
    binary, regex, pairs, variants = positional[0], positional[1], positional[2], positional[3:]
    if not pairs.isdigit() or int(pairs) < 1:
        raise ValueError(f"PAIRS must be a positive integer, not {pairs!r}")
    if (named["--output"] is None) != (named["--commit"] is None):
        raise ValueError("--output and --commit go together (the file names the build)")
    return (binary, regex, int(pairs), variants, named["--base"], overrides(sets),
            named["--output"], named["--commit"])


def write_json(path, report):
    """``report`` to ``path`` whole or not at all (a temporary beside it, then a rename)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, path)


def main(argv):
    try:
        binary, regex, pairs, variants, base, params, output, commit = parse_args(argv)
    except ValueError as e:
        sys.exit(f"flag_pairs: {e}")
    _, listed = workloads.load()
    report = {"commit": commit, "device": "", "binary": binary, "base": base, "set": params,
              "pairs": pairs, "rows": []}
    for w in (with_params(w, params) for w in workloads.select(listed, only=regex)):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = interleave.command(w, interleave.SYSTEM, binary, 5, 20, tmp)
            for flags in variants:
                ms, first = interleave.time_commands(sides(cmd, base, flags), pairs,
                                                     attention.run_cli)
                kernels = {side: out.get("kernel") for side, out in first.items()}
                report["device"] = report["device"] or first["A"].get("device", "")
                ratios = [b / a for a, b in zip(ms["A"], ms["B"])]
                row = {"workload": w["name"], "flags": flags,
                       "a_ms": statistics.median(ms["A"]), "b_ms": statistics.median(ms["B"]),
                       "ratio": statistics.median(ratios), "min": min(ratios),
                       "max": max(ratios), "kernel_a": kernels.get("A"),
                       "kernel_b": kernels.get("B")}
                print(f"{w['name']:28s} {flags:24s} A {row['a_ms']:.4f} ms  "
                      f"B {row['b_ms']:.4f} ms  B/A {row['ratio']:.3f} "
                      f"({row['min']:.3f}-{row['max']:.3f}, {pairs} pairs)", flush=True)
                if output:
                    report["rows"].append(row)
                    write_json(output, report)


if __name__ == "__main__":
    main(sys.argv[1:])
