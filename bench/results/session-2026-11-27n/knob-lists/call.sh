#!/usr/bin/env bash
# H100, 8a96c8e: tile lists on the 128x128 tile at head dim 128 with Q in registers, with and without ping-pong (one binary).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
W=/tmp/k2; mkdir -p $W $OUT/k2; cp .carry/knob2/fm $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/k2/device.txt
python3 - <<'PY'
import sys, json, os, tomllib
sys.path.insert(0, "bench")
import torch
from suite.routines import attention as a
names = ["fwd.s16384.random50", "fwd.s16384.topk8", "fwd.s16384.blocksparse10", "fwd.s8192.random50"]
wl = {w["name"]: w for w in tomllib.load(open("bench/suite/workloads.toml", "rb"))["workload"]}
out = {}
for name in names:
    p = dict(wl[name]["params"]); kind, arg = a._spec(p["mask"])
    extra = a.host_inputs(torch, p, kind, arg) if a.needs_host_inputs(kind) else {}
    tmp = f"/tmp/k2/{name}"; os.makedirs(tmp, exist_ok=True)
    out[name] = a.cli_command("/tmp/k2/fm", p, extra, 5, 20, tmp)[1:]
json.dump(out, open("/tmp/k2/cmds.json", "w"))
PY
python3 - <<'PY'
import json, subprocess, statistics as st, os
cmds = json.load(open("/tmp/k2/cmds.json"))
V = {"base": ["--q-registers", "false", "--pingpong", "false"], "q": ["--q-registers", "true", "--pingpong", "false"],
     "q+pp": ["--q-registers", "true", "--pingpong", "true"], "pp": ["--q-registers", "false", "--pingpong", "true"]}
def run(v, args):
    r = subprocess.run(["/tmp/k2/fm"] + args + V[v], capture_output=True, text=True, timeout=120)
    try: return json.loads(r.stdout.strip().splitlines()[-1])["ms_median"]
    except Exception: print("FAILED", v, r.stderr[-300:]); return None
for name, args in cmds.items():
    for v in V: run(v, args)
res = {}
for rep in range(3):
    order = list(V) if rep % 2 == 0 else list(V)[::-1]
    for name, args in cmds.items():
        for v in order: res.setdefault(name, {}).setdefault(v, []).append(run(v, args))
json.dump(res, open(os.environ["OUT"] + "/k2/knob.json", "w"), indent=1)
for name, d in res.items():
    b = st.median([x for x in d["base"] if x])
    print(f"{name:26s} base {b:.4f} " + " ".join(f"{v} {st.median([x for x in d[v] if x])/b:.3f}" for v in V if v != "base"))
PY
