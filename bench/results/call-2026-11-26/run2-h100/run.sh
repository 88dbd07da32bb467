#!/usr/bin/env bash
# fragmask helper "call", second run: A/B of the base wheel (main's build) and this
# branch's final wheel on the overhead table's tiny rows (bench/python_overhead.py
# --tiny-only), alternating base/new three times; host-time parts of decode, lightning
# and the backward for both; the GPU tests with the new wheel; then, if time is left,
# the whole overhead table (Flex included) of the new wheel. Run from the main
# checkout's root with $OUT set.
set -u
C=.carry/call
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/call_out}; mkdir -p "$OUT"
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --target /tmp/fm_base .carry/s10/fin/fragmask-*.whl
python3 -m pip install -q --no-index --no-deps --target /tmp/fm_new $C/wheel/fragmask-*.whl
echo "new build: $(cat $C/wheel/COMMIT)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$OUT/device.txt"
for w in base new; do
  PYTHONPATH=/tmp/fm_$w timeout 120 python3 -c "
import torch, fragmask
fragmask.warmup(head_dims=(128,), lightning=((96, 96, 'bf16'),))
q,k,v=(torch.randn(1,2,256,128,device='cuda',dtype=torch.bfloat16,requires_grad=True) for _ in range(3))
fragmask.attention(q,k,v,causal=True).backward(torch.randn_like(q))
dq=torch.randn(1,1,8,128,device='cuda',dtype=torch.bfloat16); kc=torch.randn(1,256,8,128,device='cuda',dtype=torch.bfloat16)
fragmask.decode(dq,kc,kc); torch.cuda.synchronize()" > "$OUT/warm-$w.txt" 2>&1
done
echo "warm: $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
  order="base new"; [ $r = 2 ] && order="new base"
  for w in $order; do
    PYTHONPATH=/tmp/fm_$w timeout 60 python3 $C/bench/python_overhead.py --tiny-only \
      --json "$OUT/tiny-$w-$r.json" > "$OUT/tiny-$w-$r.txt" 2>&1 || echo "tiny $w $r rc=$?"
  done
done
echo "tiny: $(( $(date +%s) - t0 )) s"
for w in base new; do
  PYTHONPATH=/tmp/fm_$w timeout 40 python3 $C/bench/call_host_parts.py "$OUT/parts-$w.json" > "$OUT/parts-$w.txt" 2>&1
  PYTHONPATH=/tmp/fm_$w timeout 30 python3 $C/bench/lightning_host_parts.py "$OUT/lparts-$w.json" > "$OUT/lparts-$w.txt" 2>&1
done
echo "parts: $(( $(date +%s) - t0 )) s"
(cd $C/tests && PYTHONPATH=/tmp/fm_new timeout 70 python3 -m unittest -v test_gpu test_torch > "$OUT/tests-new.txt" 2>&1; echo "tests rc=$?" >> "$OUT/tests-new.txt")
echo "tests: $(( $(date +%s) - t0 )) s"
left=$(( 228 - ( $(date +%s) - t0 ) ))
if [ $left -gt 40 ]; then
  PYTHONPATH=/tmp/fm_new timeout $left python3 $C/bench/python_overhead.py --targets-only \
    --json "$OUT/full-new.json" > "$OUT/full-new.txt" 2>&1 || echo "full rc=$?"
fi
echo "== summary (us; overhead = eager - graph)"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
keys = ["eager attention, no grad (us)", "autograd forward (us)",
        "autograd backward, over its kernels (us)",
        "torch's floor: a kernel-free autograd.Function's backward (us)",
        "torch's floor: the same of q, k, v, three gradients accumulated (us)",
        "autograd backward over its kernels, minus that floor (us)",
        "decode (us)", "DecodePlan.run (us)", "lightning_decode (us)",
        "lightning_decode with out= (us)", "AttentionPlan.run (us)",
        "lightning decode eager H=64 D=E=96 B=1 (us per step)"]
runs = {}
for w in ("base", "new"):
    for r in (1, 2, 3):
        p = os.path.join(out, f"tiny-{w}-{r}.json")
        try:
            t = {row[0]: row for row in json.load(open(p)).get("targets", [])}
        except Exception as e:
            print(p, e); continue
        runs.setdefault(w, []).append(t)
def med(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None
print("| what | target | base rounds | base median | new rounds | new median | SDPA (new runs) |")
print("|---|---|---|---|---|---|---|")
for k in keys:
    cells, tgt = [], "-"
    for w in ("base", "new"):
        vals = [t.get(k, [None] * 3)[2] for t in runs.get(w, [])]
        tgt = next((t[k][1] for t in runs.get(w, []) if k in t), tgt)
        cells += [" / ".join("-" if v is None else f"{v:.1f}" for v in vals),
                  "-" if med(vals) is None else f"{med(vals):.1f}"]
    sd = [t.get(k, [None] * 4)[3] for t in runs.get("new", [])]
    print(f"| {k} | {tgt} | " + " | ".join(cells) + " | "
          + " / ".join("-" if v is None else f"{v:.1f}" for v in sd) + " |")
PY
echo "-- parts (base | new)"; paste "$OUT/parts-base.txt" "$OUT/parts-new.txt" | cut -c1-160
echo "-- lightning parts (base | new)"; paste "$OUT/lparts-base.txt" "$OUT/lparts-new.txt" | cut -c1-130
echo "-- tests"; grep -E "^(FAIL|ERROR)|Ran |^OK|FAILED|rc=" "$OUT/tests-new.txt" | head -30
echo "-- full table (new)"; sed -n '/^Targets/,$p' "$OUT/full-new.txt" 2>/dev/null
echo "total: $(( $(date +%s) - t0 )) s"
