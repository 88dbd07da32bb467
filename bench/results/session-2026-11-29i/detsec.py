"""Deterministic backward: plane-interleaved launch sections against the plane-major grid.

usage: detsec.py A_BIN B_BIN OUT_JSONL [ROUNDS]
A: the binary before (no sections in the deterministic mode); B: with them (--head-section N).
Runs `fragmask bench backward --deterministic` per row, A and B per section size interleaved,
and the non-deterministic time of A as the reference; prints a table last."""
import json, subprocess, sys, time

A, B, OUT = sys.argv[1:4]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 1
SHAPE = "1,16,16,16384,16384,128"
ROWS = {
    "none": [],
    "causal": ["--causal"],
    "random50": ["--synthetic-mask", "random:0.5"],
    "blocksparse10": ["--synthetic-mask", "blocksparse:0.1:0.5"],
    "gqa32:8 causal": ["--causal", "--random-override", "1,32,8,16384,16384,128"],
}
SECTIONS = [1, 4, 16]


def bench(binary, flags, shape=SHAPE, det=True):
    cmd = [binary, "bench", "backward", "--random", shape, "--json", "--warmup", "5", "--iters", "20"] + flags
    if det:
        cmd.append("--deterministic")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-300:]
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j.get("ms_median"), j.get("kernel")


out = open(OUT, "a")
res = {}
for rnd in range(ROUNDS):
    for name, flags in ROWS.items():
        shape = SHAPE
        if "--random-override" in flags:
            shape = flags[flags.index("--random-override") + 1]
            flags = [f for f in flags if f not in ("--random-override", shape)]
        runs = [("A det", A, [], True), ("A nondet", A, [], False)] + [
            (f"B det s{n}", B, ["--head-section", str(n)], True) for n in SECTIONS]
        if rnd % 2:
            runs.reverse()
        for label, binary, extra, det in runs:
            ms, info = bench(binary, flags + extra, shape, det)
            rec = {"row": name, "run": label, "round": rnd, "ms": ms, "info": info}
            out.write(json.dumps(rec) + "\n"); out.flush()
            res.setdefault((name, label), []).append(ms)
            print(json.dumps(rec), flush=True)

print("\n| row | A nondet | A det | " + " | ".join(f"B det s{n} (/A det)" for n in SECTIONS) + " |")
for name in ROWS:
    def med(label):
        v = sorted(x for x in res.get((name, label), []) if x)
        return v[len(v) // 2] if v else None
    a = med("A det")
    cells = []
    for n in SECTIONS:
        b = med(f"B det s{n}")
        cells.append(f"{b:.3f} ({b / a:.3f})" if a and b else "-")
    nd = med("A nondet")
    print(f"| {name} | {nd and round(nd, 3)} | {a and round(a, 3)} | " + " | ".join(cells) + " |")
