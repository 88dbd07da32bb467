"""Write-up 002's backward (N=23296, H=12, D=128, 64-token blocks) at several kept fractions,
flag variants of one binary, interleaved rounds (order reversed every other round); each
variant's time over the first's.
usage (repo root): detdens.py BIN ROUNDS "FRACTIONS" "FLAGS" ["FLAGS" ...]"""
import copy, statistics, sys, tempfile
sys.path.insert(0, ".")
from bench.suite import interleave, workloads
from bench.suite.routines import attention

binary, rounds, fractions, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
_, listed = workloads.load()
base = next(w for w in listed if w["name"] == "bwd.wu002.blocks10")
for f in fractions:
    w = copy.deepcopy(base)
    w["params"]["mask"] = f"blocks64:{f}"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = interleave.command(w, interleave.SYSTEM, binary, 5, 20, tmp)
        ms = {v: [] for v in variants}
        kern = {}
        for r in range(rounds):
            for v in (variants if r % 2 == 0 else variants[::-1]):
                try:
                    out = attention.run_cli(cmd + v.split())
                    ms[v].append(out["ms_median"]); kern.setdefault(v, out.get("kernel"))
                except Exception as e:
                    kern[v] = f"failed: {str(e)[:120]}"
        first = statistics.median(ms[variants[0]]) if ms[variants[0]] else float("nan")
        for v in variants:
            m = statistics.median(ms[v]) if ms[v] else float("nan")
            print(f"kept {f:5s} {v:52s} {m:8.4f} ms  over first {m / first:.3f}  {kern.get(v)}", flush=True)
