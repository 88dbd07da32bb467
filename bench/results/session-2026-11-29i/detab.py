"""Deterministic backward, A against B at their defaults (CLI kernel time), interleaved rounds,
with A's non-deterministic time beside. usage: detab.py A_BIN B_BIN OUT_JSONL ROUNDS"""
import json, subprocess, sys

A, B, OUT = sys.argv[1:4]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 2
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


def bench(binary, shape, flags, det=True):
    cmd = [binary, "bench", "backward", "--random", shape, "--json", "--warmup", "5", "--iters", "20"] + flags
    cmd += ["--deterministic"] if det else []
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()[-200:]
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j.get("ms_median"), j.get("kernel")


out = open(OUT, "a")
res = {}
for rnd in range(ROUNDS):
    for name, shape, flags in ROWS:
        runs = [("A det", A, True), ("B det", B, True)]
        if rnd == 0:
            runs.append(("A nondet", A, False))
        if rnd % 2:
            runs.reverse()
        for label, binary, det in runs:
            ms, info = bench(binary, shape, flags, det)
            rec = {"row": name, "run": label, "round": rnd, "ms": ms, "info": info}
            out.write(json.dumps(rec) + "\n"); out.flush()
            res.setdefault((name, label), []).append(ms)
print("| row | A nondet ms | A det ms | B det ms | B/A (rounds) | B det over nondet |")
for name, _, _ in ROWS:
    a = [x for x in res.get((name, "A det"), []) if x]
    b = [x for x in res.get((name, "B det"), []) if x]
    nd = [x for x in res.get((name, "A nondet"), []) if x]
    if not a or not b:
        print(f"| {name} | - | - | - | failed | |"); continue
    ratios = [y / x for x, y in zip(a, b)]
    ma, mb = sorted(a)[len(a) // 2], sorted(b)[len(b) // 2]
    print(f"| {name} | {nd[0] if nd else 0:.3f} | {ma:.3f} | {mb:.3f} | {mb / ma:.3f} ({', '.join(f'{r:.3f}' for r in ratios)}) | "
          f"{mb / nd[0] if nd else 0:.2f} |")
