"""Interleaved A/B of one ``fragmask`` binary's flags on suite workloads (GPU machine):

    python3 -m bench.suite.flag_pairs BINARY WORKLOAD_REGEX PAIRS "FLAGS" ["FLAGS" ...]

Per workload the ``fragmask bench`` command is built once (any mask file packed once, as
``run.py --interleave`` does), then each FLAGS variant (appended to it) runs against the
command as it is in ABBA pairs (interleave.time_pairs). Prints one line per workload and
variant: the medians and B/A (variant over default), the median over pairs and its spread.
"""
import statistics
import sys
import tempfile

from . import interleave, workloads
from .routines import attention


def main(argv):
    binary, regex, pairs, variants = argv[0], argv[1], int(argv[2]), argv[3:]
    _, listed = workloads.load()
    for w in workloads.select(listed, only=regex):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = interleave.command(w, interleave.SYSTEM, binary, 5, 20, tmp)
            for flags in variants:
                extra = flags.split()
                # "A" runs the command as it is, "B" with the flags (the binary is the same).
                calls = {"A": cmd, "B": cmd + extra}
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
