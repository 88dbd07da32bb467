"""Two binaries A and B on suite rows with extra flags, ABBA pairs (one command per row).
usage: python3 -m ... binab.py A_BIN B_BIN REGEX PAIRS "FLAGS" (run from the repo root)"""
import statistics, sys, tempfile
sys.path.insert(0, ".")
from bench.suite import interleave, workloads
from bench.suite.routines import attention

a, b, regex, pairs, flags = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split()
_, listed = workloads.load()
for w in workloads.select(listed, only=regex):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = interleave.command(w, interleave.SYSTEM, a, 5, 20, tmp) + flags
        ms, kernels = interleave.time_pairs(cmd, {"A": a, "B": b}, pairs, attention.run_cli)
        r = [y / x for x, y in zip(ms["A"], ms["B"])]
        print(f"{w['name']:28s} {' '.join(flags):16s} A {statistics.median(ms['A']):.4f} ms  B {statistics.median(ms['B']):.4f} ms  "
              f"B/A {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f}, {pairs} pairs)  A: {kernels.get('A')}  B: {kernels.get('B')}", flush=True)
