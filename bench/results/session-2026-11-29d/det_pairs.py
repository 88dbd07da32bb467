"""Interleaved A/B of the deterministic backward (`fragmask bench backward --deterministic`) of
two binaries, with B's non-deterministic time beside it: `python3 det_pairs.py A B ROUNDS`.
Prints one row per workload: medians over rounds, B/A and B-det over B-nondet."""
import json
import statistics
import subprocess
import sys

A, B, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
SHAPE = "1,16,16,16384,16384,128"
ROWS = {
    "none": [],
    "causal": ["--causal"],
    "window1024": ["--window", "1024,0"],
    "random50": ["--synthetic-mask", "random:0.5"],
    "gqa32:8 causal": ["--causal", "@1,32,8,16384,16384,128"],
    "none S=32768 H=4": ["@1,4,4,32768,32768,128"],
    "causal S=32768 H=4": ["--causal", "@1,4,4,32768,32768,128"],
}


def run(binary, flags, det):
    shape = SHAPE
    args = []
    for f in flags:
        if f.startswith("@"):
            shape = f[1:]
        else:
            args.append(f)
    cmd = [binary, "bench", "backward", "--random", shape, "--json", "--warmup", "5", "--iters", "20"] + args
    if det:
        cmd.append("--deterministic")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return float("nan"), "TIMEOUT"
    if r.returncode != 0:
        return float("nan"), (r.stderr or r.stdout).strip()[-200:]
    return json.loads(r.stdout.strip().splitlines()[-1])["ms_median"], ""


res = {k: {"A": [], "B": [], "Bn": []} for k in ROWS}
for rnd in range(ROUNDS):
    order = [("A", A, True), ("B", B, True), ("Bn", B, False)]
    if rnd % 2:
        order.reverse()
    for name, flags in ROWS.items():
        for key, binary, det in order:
            ms, err = run(binary, flags, det)
            res[name][key].append(ms)
            if err:
                print(f"{name} {key}: {err}", flush=True)
print(f"{'row':22} {'A det ms':>9} {'B det ms':>9} {'B ms':>8} {'B/A det':>8} {'Bdet/B':>7}")
for name, r in res.items():
    a, b, bn = (statistics.median(r[k]) for k in ("A", "B", "Bn"))
    print(f"{name:22} {a:9.3f} {b:9.3f} {bn:8.3f} {b / a:8.3f} {b / bn:7.3f}", flush=True)
