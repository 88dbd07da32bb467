"""Deterministic block-sparse backward at named --head-section sizes (one binary, CLI kernel
time, 2 interleaved rounds). usage: secsweep.py BIN OUT_JSONL"""
import json, subprocess, sys
BIN, OUT = sys.argv[1:3]
CASES = [
    ("blocksparse10 S16384 H16", "1,16,16,16384,16384,128", "blocksparse:0.1:0.5", [1, 2, 4, 8, 16]),
    ("blocksparse50 S16384 H16", "1,16,16,16384,16384,128", "blocksparse:0.5:0.5", [1, 4, 8, 16]),
    ("blocksparse10 B4 H32 S4096", "4,32,32,4096,4096,128", "blocksparse:0.1:0.5", [1, 8, 16, 32, 64, 128]),
]
res = {}
out = open(OUT, "a")
for rnd in range(2):
    for name, shape, mask, secs in CASES:
        for n in (secs if rnd == 0 else secs[::-1]):
            cmd = [BIN, "bench", "backward", "--random", shape, "--json", "--warmup", "5", "--iters", "20",
                   "--synthetic-mask", mask, "--deterministic", "--head-section", str(n)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            ms = json.loads(r.stdout.strip().splitlines()[-1]).get("ms_median") if r.returncode == 0 else None
            out.write(json.dumps({"case": name, "section": n, "round": rnd, "ms": ms}) + "\n")
            res.setdefault((name, n), []).append(ms)
for name, _, _, secs in CASES:
    base = min(x for x in res[(name, 1)] if x)
    print(f"{name}: " + ", ".join(f"s{n} {min(x for x in res[(name, n)] if x):.3f} ({min(x for x in res[(name, n)] if x) / base:.3f})" for n in secs))
