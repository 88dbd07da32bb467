"""ABBA pairs of the 128x64-tile backward at head dim 128 (S=16384, H=16, random 50%):
the default (dQ writer warp, which spills 28 bytes) against --dq-writer false, and the
128x128 tile as a reference. Usage: python3 pairs128x64.py BINARY PAIRS"""
import statistics, sys
sys.path.insert(0, ".")
from bench.suite import interleave
from bench.suite.routines import attention

fm, pairs = sys.argv[1], int(sys.argv[2])
base = [fm, "bench", "backward", "--random", "1,16,16,16384,16384,128", "--json",
        "--warmup", "5", "--iters", "20", "--synthetic-mask", "random:0.5"]
A = base + ["--block", "128x64"]
variants = {"128x64 --dq-writer false": A + ["--dq-writer", "false"],
            "128x128 (default tile)": base + ["--block", "128x128"]}
for name, B in variants.items():
    ms = {"A": [], "B": []}
    for side in interleave.abba(pairs):
        ms[side].append(attention.run_cli(A if side == "A" else B)["ms_median"])
    r = [b / a for a, b in zip(ms["A"], ms["B"])]
    print(f"128x64 default A {statistics.median(ms['A']):.4f} ms | {name:26s} B {statistics.median(ms['B']):.4f} ms"
          f"  B/A {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f}, {pairs} pairs)", flush=True)
