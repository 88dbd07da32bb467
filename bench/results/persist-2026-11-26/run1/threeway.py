#!/usr/bin/env python3
"""Three-way interleaved timing of suite rows (the suite's own CLI commands): base12's binary,
this build with --persistent off, and with --persistent on. Rounds alternate the order
(base off on, on off base). Writes JSON rows and prints a table."""
import json, os, statistics, sys, tempfile, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from suite import workloads as wl, interleave  # noqa: E402
from suite.routines import attention  # noqa: E402

base_bin, new_bin, out_path, budget = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
names = sys.argv[5].split(",")
rounds = int(os.environ.get("ROUNDS", "2"))
_, workloads = wl.load(os.path.join(HERE, "suite", "workloads.toml"))
by_name = {w["name"]: w for w in workloads}
sides = {"base": (base_bin, []), "off": (new_bin, ["--persistent", "off"]), "on": (new_bin, ["--persistent", "on"])}
use = os.environ.get("SIDES", "base,off,on").split(",")
orders = [[x for x in o if x in use] for o in (["base", "off", "on"], ["on", "off", "base"])]
start = time.time()
rows = []
for name in names:
    if time.time() - start > budget:
        rows.append({"workload": name, "status": "skipped (budget)"}); print(name, "skipped"); continue
    w = by_name[name]
    ms = {k: [] for k in sides if k in use}; kern = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cmd = interleave.command(w, "fragmask_cli", base_bin, 5, 20, tmp)
            for r in range(rounds):
                for side in orders[r % 2]:
                    b, extra = sides[side]
                    out = attention.run_cli([b] + cmd[1:] + extra)
                    ms[side].append(out["ms_median"]); kern[side] = out.get("kernel")
        row = {"workload": name, "status": "ok", "ms": ms, "kernel": kern, "command": " ".join(cmd[1:])}
    except Exception as e:
        row = {"workload": name, "status": f"failed: {type(e).__name__}: {e}"[:400], "ms": ms}
    rows.append(row)
    if row["status"] == "ok":
        med = {k: statistics.median(v) for k, v in ms.items()}
        med.setdefault("on", float("nan"))
        print(f"{name:28s} base {med['base']:.4f} off {med['off']:.4f} on {med['on']:.4f}  "
              f"off/base {med['off']/med['base']:.3f}  on/base {med['on']/med['base']:.3f}  on/off {med['on']/med['off']:.3f}  "
              f"raw {json.dumps(ms)}", flush=True)
    else:
        print(name, row["status"], flush=True)
json.dump({"base": open(os.path.join(os.path.dirname(base_bin), "COMMIT")).read().strip(),
           "new": open(os.path.join(os.path.dirname(new_bin), "COMMIT")).read().strip(),
           "rounds": rounds, "rows": rows}, open(out_path, "w"), indent=1)
print("\n| workload | base12 ms | off ms | on ms | off/base | on/base | on/off |\n|---|---|---|---|---|---|---|")
for r in rows:
    if r.get("status") == "ok":
        m = {k: statistics.median(v) for k, v in r["ms"].items()}
        m.setdefault("on", float("nan"))
        print(f"| {r['workload']} | {m['base']:.4f} | {m['off']:.4f} | {m['on']:.4f} | {m['off']/m['base']:.3f} | {m['on']/m['base']:.3f} | {m['on']/m['off']:.3f} |")
