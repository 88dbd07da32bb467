#!/usr/bin/env python3
"""Step-loop regions of the D=128 causal backward, ours (lse read after the S^T wait: lse0, or at
FlashAttention-4's place: lse4) beside FlashAttention-4's, from the Nsight Compute SASS pages of this
folder (one H200). Absolute samples per region, in thousands.

    python3 regions.py        # run in this folder; needs ../../session-2026-11-27o/ncu-bwd/sass_dump.py
"""
import csv, gzip, io, re, subprocess, sys, tarfile, os
HERE = os.path.dirname(os.path.abspath(__file__))
DUMP = os.path.join(HERE, "../../session-2026-11-27o/ncu-bwd/sass_dump.py")


def sass_csv(name):
    if name == "fa4":
        with tarfile.open(os.path.join(HERE, "ncu-fa4-bwd-causal.tar")) as t:
            data = t.extractfile("ncu-fa4-bwd-causal.sass.csv.gz").read()
        path = "/tmp/_fa4_sass.csv.gz"
        open(path, "wb").write(data)
        return path, "flash_bwd_sm90"
    return os.path.join(HERE, f"ncu-{name}.sass.csv.gz"), "^fragmask_attention_bwd$"


def rows_and_total(name):
    path, pat = sass_csv(name)
    out = subprocess.run([sys.executable, DUMP, path, pat], capture_output=True, text=True, check=True).stdout
    rows = []
    for l in out.splitlines():
        a, n, pct, *s = l.split(None, 3)
        rows.append((int(a, 16), float(n.rstrip("M")), float(pct.rstrip("%")), s[0].strip() if s else ""))
    total = 0
    with gzip.open(path, "rt") as f:
        head = kname = None
        for r in csv.reader(f):
            if r and r[0] == "Kernel Name":
                kname, head = r[1], None
                continue
            if r and r[0] == "Address":
                head = r
                continue
            if head and kname and re.search(pat, kname) and len(r) == len(head):
                total += int(dict(zip(head, r))["Warp Stall Sampling (All Samples)"] or 0)
    return [r for r in rows if r[1] >= 1.9], total   # the per-step instructions (2.11 M executions)


def first(rows, pat, after=0):
    return next(a for a, _, _, s in rows if a >= after and re.search(pat, s))


def cuts(rows, fa4):
    q = first(rows, r"TRYWAIT"); s = first(rows, r"HGMMA.64x64x16.F32.BF16 R184, gdesc\[UR\d+\], RZ", q)
    do = first(rows, r"TRYWAIT", s); dp = first(rows, r"HGMMA.64x64x16.F32.BF16 R152, gdesc\[UR\d+\], RZ", do)
    w1 = first(rows, r"DEPBAR.LE gsb0, 0x1", dp); w0 = first(rows, r"DEPBAR.LE gsb0, 0x0", w1)
    st = first(rows, r"STSM", w0); bar = first(rows, r"BAR.SYNC" if fa4 else r"BAR.SYNC.DEFER_BLOCKING 0x1,", st)
    dq = first(rows, r"tnspB, RZ" if fa4 else r"tnspA.tnspB, RZ", bar)
    w2 = first(rows, r"DEPBAR.LE gsb0, 0x1", dq); end = first(rows, r"DEPBAR.LE gsb0, 0x0", w2)
    return [("wait Q", q), ("S issue", s), ("wait dO", do), ("dP issue", dp), ("wait S + P", w1),
            ("wait dP + dS + convert", w0), ("dS store + dV issue", st), ("dS barrier", bar),
            ("dQ+dK issue", dq), ("wait dQ + staging + sync + bulk", w2), ("wait dK + release", end)]


res = {}
for name in ("lse0", "lse4", "fa4"):
    rows, total = rows_and_total(name)
    out, cur, i, c = {}, "loop top", 0, cuts(rows, name == "fa4")
    for a, _, p, _ in rows:
        while i < len(c) and a >= c[i][1]:
            cur = c[i][0]; i += 1
        out[cur] = out.get(cur, 0) + p * total / 100
    res[name] = out
names = ["loop top"] + [n for n, _ in cuts(rows_and_total("lse0")[0], False)]
print(f"{'region (k samples)':34s}" + "".join(f"{k:>10s}" for k in res))
for n in names:
    print(f"{n:34s}" + "".join(f"{res[k].get(n, 0) / 1000:10.1f}" for k in res))
print(f"{'step loop':34s}" + "".join(f"{sum(res[k].values()) / 1000:10.1f}" for k in res))
