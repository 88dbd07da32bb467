#!/usr/bin/env bash
# H100: head dim 64's 64-query backward (K/V in registers; its fragment addresses now from fm_ldmatrix_a_offset), 640accb against 8a96c8e.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
W=/tmp/kvr; mkdir -p $W $OUT/kvr; cp .carry/kvr/base .carry/kvr/fm $W/
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/kvr/device.txt
python3 - <<'PY'
import json, subprocess, statistics as st, os
base = ["bench", "backward", "--json", "--warmup", "5", "--iters", "20", "--bwd-step", "64"]
rows = {"d64.s16384.none.step64": ["--random", "1,16,16,16384,16384,64"],
        "d64.s16384.causal.step64": ["--random", "1,16,16,16384,16384,64", "--causal"],
        "d64.s8192.none.step64": ["--random", "1,16,16,8192,8192,64"]}
def run(b, r):
    p = subprocess.run(["/tmp/kvr/" + b] + base + rows[r], capture_output=True, text=True, timeout=120)
    try: return json.loads(p.stdout.strip().splitlines()[-1])["ms_median"]
    except Exception: print("FAILED", b, r, p.stderr[-300:]); return None
for r in rows:
    for b in ("base", "fm"): run(b, r)
res = {}
for rep in range(4):
    order = ("base", "fm") if rep % 2 == 0 else ("fm", "base")
    for r in rows:
        for b in order: res.setdefault(r, {}).setdefault(b, []).append(run(b, r))
json.dump(res, open(os.environ["OUT"] + "/kvr/ab.json", "w"), indent=1)
for r, d in res.items():
    b = [x for x in d["base"] if x]; n = [x for x in d["fm"] if x]
    print(f"{r:28s} 640accb {st.median(b):.4f} 8a96c8e {st.median(n):.4f} ratio {st.median(n)/st.median(b):.3f} {[round(y/x,3) for x, y in zip(b, n)]}")
PY
