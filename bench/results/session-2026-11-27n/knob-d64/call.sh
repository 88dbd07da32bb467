#!/usr/bin/env bash
# H100, 8a96c8e: head dim 64 forward, the default 192x128 tile against 128x128 with and without Q in registers (one binary).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
W=/tmp/k3; mkdir -p $W $OUT/k3; cp .carry/knob3/fm $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/k3/device.txt
python3 - <<'PY'
import json, subprocess, statistics as st, os
base = ["bench", "attention", "--json", "--warmup", "5", "--iters", "20"]
rows = {"d64.none16k": ["--random", "1,16,16,16384,16384,64"], "d64.causal16k": ["--random", "1,16,16,16384,16384,64", "--causal"],
        "d64.causal8k": ["--random", "1,16,16,8192,8192,64", "--causal"]}
V = {"192x128": [], "128x128": ["--block", "128x128"], "128x128+q": ["--block", "128x128", "--q-registers", "true"]}
def run(v, r):
    p = subprocess.run(["/tmp/k3/fm"] + base + rows[r] + V[v], capture_output=True, text=True, timeout=120)
    try: return json.loads(p.stdout.strip().splitlines()[-1])["ms_median"]
    except Exception: print("FAILED", v, r, p.stdout[-200:], p.stderr[-300:]); return None
for r in rows:
    for v in V: run(v, r)
res = {}
for rep in range(3):
    order = list(V) if rep % 2 == 0 else list(V)[::-1]
    for r in rows:
        for v in order: res.setdefault(r, {}).setdefault(v, []).append(run(v, r))
json.dump(res, open(os.environ["OUT"] + "/k3/knob.json", "w"), indent=1)
for r, d in res.items():
    b = st.median([x for x in d["192x128"] if x])
    print(f"{r:16s} 192x128 {b:.4f} " + " ".join(f"{v} {st.median([x for x in d[v] if x])/b:.3f}" for v in V if v != "192x128"))
PY
