"""Deterministic backward variants of one binary (CLI kernel time), interleaved rounds, with the
non-deterministic time beside. usage: detvar.py BIN OUT_JSONL ROUNDS [ROW_REGEX]
Variants: base (no writer, ascending walks), writer (dQ writer warp takes the turns),
walks (greedy walk orders), both (the defaults)."""
import json, re, subprocess, sys

BIN, OUT = sys.argv[1:3]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
ONLY = re.compile(sys.argv[4]) if len(sys.argv) > 4 else None
S16 = "1,16,16,16384,16384,128"
ROWS = [
    ("none", S16, []),
    ("causal", S16, ["--causal"]),
    ("random50", S16, ["--synthetic-mask", "random:0.5"]),
    ("topk8", S16, ["--synthetic-mask", "topk:0.125"]),
    ("blocksparse10", S16, ["--synthetic-mask", "blocksparse:0.1:0.5"]),
    ("blocksparse50", S16, ["--synthetic-mask", "blocksparse:0.5:0.5"]),
    ("blocksparse10 S4096", "1,16,16,4096,4096,128", ["--synthetic-mask", "blocksparse:0.1:0.5"]),
    ("blocksparse10 B4 H32 S4096", "4,32,32,4096,4096,128", ["--synthetic-mask", "blocksparse:0.1:0.5"]),
    ("gqa32:8 causal", "1,32,8,16384,16384,128", ["--causal"]),
]
ROWS = [r for r in ROWS if not ONLY or ONLY.search(r[0])]
VARIANTS = [
    ("base", ["--deterministic", "--dq-writer", "off", "--deterministic-walks", "off"]),
    ("writer", ["--deterministic", "--deterministic-walks", "off"]),
    ("walks", ["--deterministic", "--dq-writer", "off"]),
    ("both", ["--deterministic"]),
]


def bench(shape, flags):
    cmd = [BIN, "bench", "backward", "--random", shape, "--json", "--warmup", "5", "--iters", "20"] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-200:]
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j.get("ms_median"), j.get("kernel")


out = open(OUT, "a")
res = {}
for rnd in range(ROUNDS):
    for name, shape, flags in ROWS:
        runs = list(VARIANTS) + ([("nondet", [])] if rnd == 0 else [])
        if rnd % 2:
            runs.reverse()
        for label, vflags in runs:
            ms, info = bench(shape, flags + vflags)
            out.write(json.dumps({"row": name, "run": label, "round": rnd, "ms": ms, "info": info}) + "\n")
            out.flush()
            res.setdefault((name, label), []).append(ms)
            if ms is None:
                print(f"{name} {label}: {info}", file=sys.stderr)
med = lambda xs: sorted(xs)[len(xs) // 2] if xs else None
print("| row | nondet | base det | writer/base | walks/base | both/base | both/nondet |")
for name, _, _ in ROWS:
    m = {v: med([x for x in res.get((name, v), []) if x]) for v, _ in VARIANTS + [("nondet", [])]}
    r = lambda v: f"{m[v] / m['base']:.3f}" if m[v] and m["base"] else "-"
    nd = f"{m['both'] / m['nondet']:.2f}" if m["both"] and m["nondet"] else "-"
    print(f"| {name} | {m['nondet'] or 0:.3f} | {m['base'] or 0:.3f} | {r('writer')} | {r('walks')} | {r('both')} | {nd} |")
