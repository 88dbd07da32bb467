#!/usr/bin/env bash
# H100: Q in registers (--q-registers) on one binary: forward selftests per geometry, sanitizers, knob A/B over forward rows.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
T0=$(date +%s); W=/tmp/qreg; mkdir -p $W $OUT/q
el() { echo $(( $(date +%s) - T0 )); }
xz -dc .carry/qreg/fm.xz > $W/fm && chmod +x $W/fm
export FRAGMASK_CACHE_DIR=$W/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/q/device.txt
MODE=${1:-knob}
if [ "$MODE" = check ]; then
for b in 128x128 64x64/2x2 64x64 128x64; do
  f=$OUT/q/selftest-$(echo $b | tr / _).txt
  timeout 150 $W/fm attention --selftest --block $b --q-registers true > $f 2>&1; echo "fwd selftest $b rc=$? $(tail -1 $f) $(el) s"
done
for args in "--random 1,2,2,300,300,128 --causal" "--random 1,4,2,200,317,128 --synthetic-mask random:0.5" "--random 1,2,2,700,700,128 --synthetic-mask blocksparse:64:0.3"; do
  for t in memcheck racecheck synccheck; do
    timeout 90 compute-sanitizer --tool $t --error-exitcode 99 $W/fm attention --q-registers true $args > $W/san.txt 2>&1; echo "$t [$args] rc=$? $(grep -o '\(ERROR\|RACECHECK\|SYNCCHECK\) SUMMARY: .*' $W/san.txt | tail -1)" | tee -a $OUT/q/sanitizers.txt
  done
done
echo "sanitizers $(el) s"
exit 0
fi
python3 - <<'PY'
import sys, json, os, tomllib
sys.path.insert(0, "bench")
import torch
from suite.routines import attention as a
names = ["fwd.s16384.none", "fwd.s16384.causal", "fwd.s16384.window1024", "fwd.s16384.docs12", "fwd.s16384.random50",
         "fwd.s16384.topk8", "fwd.s16384.blocksparse10", "fwd.s4096.causal", "fwd.gqa.s16384.causal",
         "fwd.wu002.blocks10", "fwd.wu002.blocks50", "fwd.wu002.blocks10v"]
wl = {w["name"]: w for w in tomllib.load(open("bench/suite/workloads.toml", "rb"))["workload"]}
out = {}
for name in names:
    p = dict(wl[name]["params"])
    kind, arg = a._spec(p["mask"])
    extra = a.host_inputs(torch, p, kind, arg) if a.needs_host_inputs(kind) else {}
    tmp = f"/tmp/qreg/{name}"
    os.makedirs(tmp, exist_ok=True)
    out[name] = a.cli_command("/tmp/qreg/fm", p, extra, 5, 20, tmp)[1:]
json.dump(out, open("/tmp/qreg/cmds.json", "w"))
PY
python3 - <<'PY'
import json, subprocess, statistics as st, os
cmds = json.load(open("/tmp/qreg/cmds.json"))
V = {"smem": ["--q-registers", "false"], "regs": ["--q-registers", "true"]}
def run(v, args):
    r = subprocess.run(["/tmp/qreg/fm"] + args + V[v], capture_output=True, text=True, timeout=120)
    try:
        j = json.loads(r.stdout.strip().splitlines()[-1]); return j["ms_median"]
    except Exception:
        print("FAILED", v, args[:6], r.stdout[-200:], r.stderr[-300:]); return None
for name, args in cmds.items():
    for v in V: run(v, args)
res = {}
for rep in range(3):
    order = list(V) if rep % 2 == 0 else list(V)[::-1]
    for name, args in cmds.items():
        for v in order:
            res.setdefault(name, {}).setdefault(v, []).append(run(v, args))
json.dump(res, open(os.environ["OUT"] + "/q/knob.json", "w"), indent=1)
for name, d in res.items():
    b = [x for x in d["smem"] if x]; n = [x for x in d["regs"] if x]
    if b and n:
        print(f"{name:28s} smem {st.median(b):.4f} regs {st.median(n):.4f} ratio {st.median(n)/st.median(b):.3f} {[round(y/x,3) for x, y in zip(b, n)]}")
PY
echo "knob $(el) s"
