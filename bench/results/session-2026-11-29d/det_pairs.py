"""Interleaved A/B of the deterministic backward (`fragmask bench backward --deterministic`) of
binaries, with the last one's non-deterministic time beside them:
`python3 det_pairs.py ROUNDS A B [C ...]`. Prints one row per workload: medians over rounds,
each binary's det time over A's, and the last one's det time over its non-det time."""
import json
import os
import statistics
import subprocess
import sys

ROUNDS, BINS = int(sys.argv[1]), sys.argv[2:]
NAMES = [chr(ord("A") + i) for i in range(len(BINS))]
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
    elif det is None:
        cmd += SAME_CONFIG if "--synthetic-mask" in args else SAME_CONFIG_WINDOW
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return float("nan"), "TIMEOUT"
    if r.returncode != 0:
        return float("nan"), (r.stderr or r.stdout).strip()[-200:]
    return json.loads(r.stdout.strip().splitlines()[-1])["ms_median"], ""


# The deterministic kernels' own configuration, without the order: no dQ writer warp, the grid's
# launch order, one CTA per key tile (the options the deterministic mode excludes).
SAME_CONFIG = ["--dq-writer", "off"]
SAME_CONFIG_WINDOW = SAME_CONFIG + ["--head-section", "1", "--group-slices", "1"]
res = {k: {n: [] for n in NAMES + ["nondet", "nd-cfg"]} for k in ROWS}
for rnd in range(ROUNDS):
    order = [(n, b, True) for n, b in zip(NAMES, BINS)]
    if os.environ.get("NONDET", "1") != "0":
        order += [("nondet", BINS[-1], False)]
        if os.environ.get("NDCFG", "1") != "0":
            order += [("nd-cfg", BINS[-1], None)]
    if rnd % 2:
        order.reverse()
    for name, flags in ROWS.items():
        for key, binary, det in order:
            ms, err = run(binary, flags, det)
            res[name][key].append(ms)
            if err:
                print(f"{name} {key}: {err}", flush=True)
head = " ".join(f"{n + ' det':>9}" for n in NAMES)
ratios = " ".join(f"{n + '/A':>6}" for n in NAMES[1:])
print(f"{'row':22} {head} {'nondet':>8} {'nd-cfg':>8} {ratios} {'det/nd':>7} {'det/cfg':>7}")
for name, r in res.items():
    med = {k: statistics.median(v) if v else float("nan") for k, v in r.items()}
    cells = " ".join(f"{med[n]:9.3f}" for n in NAMES)
    rs = " ".join(f"{med[n] / med['A']:6.3f}" for n in NAMES[1:])
    last = med[NAMES[-1]]
    print(f"{name:22} {cells} {med['nondet']:8.3f} {med['nd-cfg']:8.3f} {rs} {last / med['nondet']:7.3f} "
          f"{last / med['nd-cfg']:7.3f}", flush=True)
