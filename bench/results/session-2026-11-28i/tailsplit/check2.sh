#!/usr/bin/env bash
# The split tail, second pass (GPU machine, repository root; the change's binary as /tmp/B/fragmask
# and its wheel in .carry/DIR): the whole forward selftest, and the Python op on calls that take the
# tail against torch's SDPA (fp32 math) on the same inputs.
source bench/suite/device_env.sh
B=/tmp/B/fragmask
timeout 400 $B attention --selftest > "$OUT/selftest-forward.txt" 2>&1
echo "forward selftest: rc $? $(grep -c '^PASS' "$OUT/selftest-forward.txt") passed, $(grep -c '^FAIL' "$OUT/selftest-forward.txt") failed; $(tail -1 "$OUT/selftest-forward.txt")"
grep '^FAIL' "$OUT/selftest-forward.txt" | head -5
site=$(fm_install "$1")
PYTHONPATH=$site python3 - <<'PY'
import torch, fragmask
torch.manual_seed(0)
for (B, H, S, D, causal) in [(1, 16, 16384, 64, False), (1, 16, 16384, 128, False), (2, 8, 8192, 256, False)]:
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = fragmask.attention(q, k, v, causal=causal)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    err = ((o.float() - ref).norm() / ref.norm()).item()
    plan = fragmask.AttentionPlan(q, k, v, causal=causal)
    o2 = plan.run(q, k, v)
    err2 = ((o2.float() - ref).norm() / ref.norm()).item()
    print(f"python op B={B} H={H} S={S} D={D}: rel err {err:.2e}; plan (tail {plan._handle.tail}) rel err {err2:.2e}")
PY
