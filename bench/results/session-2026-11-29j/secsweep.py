"""Deterministic backward (the default: writer warp, walk orders) at several planes per
section, interleaved rounds (CLI kernel time). usage: secsweep.py BIN OUT_JSONL ROUNDS"""
import json, subprocess, sys

BIN, OUT = sys.argv[1:3]
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
ROWS = [
    ("blocksparse10", "1,16,16,16384,16384,128", "blocksparse:0.1:0.5"),
    ("blocksparse50", "1,16,16,16384,16384,128", "blocksparse:0.5:0.5"),
    ("blocksparse10 S4096", "1,16,16,4096,4096,128", "blocksparse:0.1:0.5"),
    ("blocksparse10 B4 H32 S4096", "4,32,32,4096,4096,128", "blocksparse:0.1:0.5"),
]
SECTIONS = [4, 8, 16]
out = open(OUT, "a")
res = {}
for rnd in range(ROUNDS):
    for name, shape, mask in ROWS:
        for sec in (SECTIONS if rnd % 2 == 0 else SECTIONS[::-1]):
            cmd = [BIN, "bench", "backward", "--random", shape, "--json", "--warmup", "5", "--iters", "20",
                   "--synthetic-mask", mask, "--deterministic", "--head-section", str(sec)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            ms = json.loads(r.stdout.strip().splitlines()[-1]).get("ms_median") if r.returncode == 0 else None
            out.write(json.dumps({"row": name, "section": sec, "round": rnd, "ms": ms}) + "\n"); out.flush()
            res.setdefault((name, sec), []).append(ms)
print("| row | " + " | ".join(f"{s} planes" for s in SECTIONS) + " | over 8 |")
for name, _, _ in ROWS:
    med = {s: sorted(x for x in res.get((name, s), []) if x) for s in SECTIONS}
    med = {s: v[len(v) // 2] if v else None for s, v in med.items()}
    print(f"| {name} | " + " | ".join(f"{med[s]:.3f}" if med[s] else "-" for s in SECTIONS) + " | "
          + " / ".join(f"{med[s] / med[8]:.3f}" if med[s] and med[8] else "-" for s in SECTIONS) + " |")
