"""Flag variants of the deterministic backward on suite rows, one binary, interleaved rounds
(the variant order reversed every other round); each variant's time over the first's.
usage (repo root): detflags.py BIN REGEX ROUNDS "FLAGS" ["FLAGS" ...]"""
import statistics, sys, tempfile
sys.path.insert(0, ".")
from bench.suite import interleave, workloads
from bench.suite.routines import attention

binary, regex, rounds, variants = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
_, listed = workloads.load()
for w in workloads.select(listed, only=regex):
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
        base = statistics.median(ms[variants[0]]) if ms[variants[0]] else float("nan")
        for v in variants:
            m = statistics.median(ms[v]) if ms[v] else float("nan")
            print(f"{w['name']:24s} {v:48s} {m:8.4f} ms  over first {m / base:.3f}  {kern.get(v)}", flush=True)
