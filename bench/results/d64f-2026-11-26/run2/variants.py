#!/usr/bin/env python3
"""Side-by-side CLI kernel times of forward variants of one binary (one H100), rounds
alternating in order. usage: variants.py OUT_JSON BUDGET_S  (binary: /tmp/d64f/B/fragmask)"""
import json, subprocess, sys, time

out, budget = sys.argv[1], float(sys.argv[2])
NEW = "/tmp/d64f/B/fragmask"
def shape(d): return f"b=1,h=16,hkv=16,sq=16384,sk=16384,d={d}"
V = [("d64.none", "default(192x192)", []),
     ("d64.none", "192x128", ["--block", "192x128"]),
     ("d64.none", "192x128 lazy-off", ["--block", "192x128", "--lazy-rescale", "false"]),
     ("d64.none", "192x192 lazy-off", ["--lazy-rescale", "false"]),
     ("d64.causal", "default(192x128)", ["--causal"]),
     ("d64.causal", "192x192", ["--causal", "--block", "192x192"]),
     ("d64.causal", "lazy-off", ["--causal", "--lazy-rescale", "false"]),
     ("d256.none", "default", []),
     ("d256.none", "lazy-off", ["--lazy-rescale", "false"])]
res = {f"{r}|{l}": [] for r, l, _ in V}
t0 = time.time()
for rnd in range(3):
    for r, l, a in (V if rnd % 2 == 0 else V[::-1]):
        if time.time() - t0 > budget:
            break
        d = r.split(".")[0][1:]
        cmd = [NEW, "attention", "--random", shape(d), "--bench", "--json", "--warmup", "5", "--iters", "20"] + a
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            ms = json.loads(p.stdout.strip().splitlines()[-1])["ms_median"]
        except Exception as e:  # noqa: BLE001
            print("FAIL", r, l, e, p.stderr[-300:] if 'p' in dir() else "", file=sys.stderr); ms = None
        res[f"{r}|{l}"].append(ms)
    print(f"round {rnd} done at {time.time()-t0:.0f}s", flush=True)
    if time.time() - t0 > budget:
        break
json.dump(res, open(out, "w"), indent=1)
base = {}
print(f"{'row':<12}{'variant':<20}{'median ms':>10}{'vs first':>9}  samples")
for key, xs in res.items():
    r, l = key.split("|")
    ok = sorted(x for x in xs if x)
    med = ok[len(ok) // 2] if ok else float("nan")
    base.setdefault(r, med)
    print(f"{r:<12}{l:<20}{med:>10.4f}{med / base[r]:>9.3f}  {' '.join(f'{x:.4f}' for x in xs if x)}")
