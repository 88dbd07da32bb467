"""ABBA pairs of the default choice against FLAGS (e.g. "--shared-kv off") on packed
64-token masks (overlap_masks.py, uniform_mask.py), N=23296, H=12.
Usage: python3 sharedkv_pairs.py BINARY PAIRS [--dim D] [--flags "FLAGS"] MASK..."""
import json, lzma, shutil, statistics, subprocess, sys, tempfile
from pathlib import Path

fm, pairs, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
dim, flags = 128, ["--shared-kv", "off"]
while rest and rest[0].startswith("--"):
    if rest[0] == "--dim":
        dim = int(rest[1])
    elif rest[0] == "--flags":
        flags = rest[1].split()
    rest = rest[2:]
masks = rest


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise SystemExit(f"{cmd}: {r.stderr[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


with tempfile.TemporaryDirectory() as tmp:
    for xz in masks:
        path = Path(tmp) / Path(xz).name.removesuffix(".xz")
        with lzma.open(xz) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        base = [fm, "bench", "attention", "--random", f"1,12,12,23296,23296,{dim}", "--mask", str(path),
                "--json", "--warmup", "5", "--iters", "20"]
        calls = {"A": base, "B": base + flags}
        ms = {"A": [], "B": []}
        kernel = ""
        for i in range(pairs):
            for side in ("AB" if i % 2 == 0 else "BA"):
                out = run(calls[side])
                ms[side].append(out["ms_median"])
                if side == "A":
                    kernel = str(out.get("kernel", ""))[:120]
        r = [b / a for a, b in zip(ms["A"], ms["B"])]
        print(f"{path.stem:22s} D={dim} default {statistics.median(ms['A']):.4f} ms  {' '.join(flags)} "
              f"{statistics.median(ms['B']):.4f} ms  B/default {statistics.median(r):.3f} "
              f"({min(r):.3f}-{max(r):.3f}, {pairs} pairs)  default kernel: {kernel}", flush=True)
