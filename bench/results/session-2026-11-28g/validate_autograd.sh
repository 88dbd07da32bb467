#!/usr/bin/env bash
# 9dcc051 (.carry/p29): the autograd leak fix of 071df43 on a GPU. The Python GPU and torch tests
# on the HEAD wheel (among them test_an_autograd_forward_frees_its_output_with_its_graph), then
# the bshd forward + reshape, with and without autograd, against main before the bshd work
# (.carry/m24, 27fdbaf), two rounds interleaved.
set -uo pipefail
source bench/suite/device_env.sh
S=bench/results/session-2026-11-28f/bshd-out
P=$(fm_install .carry/p29); M=$(fm_install .carry/m24)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(cd crates/python/tests && PYTHONPATH=$P timeout 330 python3 -m unittest test_gpu test_torch > $OUT/python_gpu.txt 2>&1)
echo "python gpu+torch rc=$? ${SECONDS}s"; grep -E "^(Ran|OK|FAILED)" $OUT/python_gpu.txt
grep -E "^(ERROR|FAIL):" $OUT/python_gpu.txt | head
grep -E "skipped" $OUT/python_gpu.txt | head -5
for r in 1 2; do
    timeout 40 python3 $S/bshd_out.py $M main-27fdbaf
    timeout 40 python3 $S/bshd_out.py $P head-9dcc051
done > $OUT/bshd_out.jsonl 2>&1
python3 - <<'PY'
import json, os, collections
rows = collections.defaultdict(list)
for line in open(os.environ["OUT"] + "/bshd_out.jsonl"):
    if line.startswith("{"):
        r = json.loads(line); rows[(r["S"], r["causal"], r["tag"])].append(r)
print(f"{'S':>6} {'causal':>6} {'tag':>14} {'fwd+reshape':>12} {'autograd':>10} contiguous")
for (s, c, t), rs in sorted(rows.items()):
    f = min(x["fwd_reshape_ms"] for x in rs); a = min(x["autograd_fwd_reshape_ms"] for x in rs)
    print(f"{s:>6} {str(c):>6} {t:>14} {f:>12.4f} {a:>10.4f} {rs[0]['out_contiguous']}")
PY
