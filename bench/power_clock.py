#!/usr/bin/env python3
"""SM clock and board power under sustained load, fragmask beside FlashAttention-4 and SDPA.

A long call's time depends on the clock the GPU holds under its power cap, so two kernels
with the same cycle count can differ in time by how much power they draw. For each workload
and system this runs the call back to back for ``--seconds`` while ``nvidia-smi`` samples
the SM clock, the board power and the software power-cap flag every 50 ms, and prints the
time per call, the median clock, the mean power and the share of samples power-capped.

    python3 bench/power_clock.py [--seconds 6] [--fa4 /tmp/fa4site] [--json OUT]

Needs a GPU, torch and the fragmask package (and FA4 for its rows). One GPU
(``CUDA_VISIBLE_DEVICES``) is sampled: the first visible one.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

QUERY = "clocks.sm,power.draw,clocks_event_reasons.sw_power_cap,temperature.gpu"


def sampler(gpu):
    """An nvidia-smi process printing QUERY every 50 ms for GPU ``gpu``."""
    return subprocess.Popen(["nvidia-smi", "-i", str(gpu), f"--query-gpu={QUERY}",
                             "--format=csv,noheader,nounits", "-lms", "50"],
                            stdout=subprocess.PIPE, text=True)


def parse(lines):
    """(clock MHz, power W, capped, temperature C) per sample line; unreadable lines dropped."""
    out = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        try:
            capped = parts[2].lower() in ("active", "0x0000000000000004", "1")
            out.append((float(parts[0]), float(parts[1]), capped, float(parts[3])))
        except (IndexError, ValueError):
            continue
    return out


def sustained(torch, fn, seconds, gpu):
    """Runs ``fn`` back to back for ``seconds`` under the sampler: ms per call and the samples'
    median clock, mean power, share power-capped and peak temperature."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    proc = sampler(gpu)
    time.sleep(0.2)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.time()
    start.record()
    while time.time() - t0 < seconds:
        for _ in range(4):
            fn()
        calls += 4
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    proc.terminate()
    samples = parse(proc.communicate()[0].splitlines())
    ms = start.elapsed_time(end) / calls
    if not samples:
        return {"ms": ms, "calls": calls, "samples": 0}
    return {"ms": ms, "calls": calls, "samples": len(samples),
            "clock_mhz": statistics.median(s[0] for s in samples),
            "power_w": statistics.fmean(s[1] for s in samples),
            "capped": sum(s[2] for s in samples) / len(samples),
            "temp_c": max(s[3] for s in samples)}


def workloads(torch, fragmask, fa4):
    """(name, {system: fn}) of the compared calls: bf16, B=1, D=128."""
    F = torch.nn.functional

    def qkv(h, hk, s):
        g = torch.Generator(device="cuda").manual_seed(0)
        mk = lambda n: torch.randn(1, n, s, 128, device="cuda", dtype=torch.bfloat16, generator=g)  # noqa: E731
        return mk(h), mk(hk), mk(hk)

    out = []
    for name, h, hk, causal in (("fwd S=16384 H=16, no mask", 16, 16, False),
                                ("fwd S=16384 H=32/8 GQA, causal", 32, 8, True)):
        q, k, v = qkv(h, hk, 16384)
        systems = {"fragmask": (lambda q=q, k=k, v=v, c=causal: fragmask.attention(q, k, v, causal=c))}
        if fa4 is not None:
            qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
            systems["fa4"] = (lambda qt=qt, kt=kt, vt=vt, c=causal: fa4(qt, kt, vt, causal=c))
        if h == hk:
            systems["sdpa"] = (lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c))
        out.append((name, systems))
    # forward + backward, no mask: the gradients of q, k, v by autograd.grad.
    q, k, v = (t.requires_grad_() for t in qkv(16, 16, 16384))
    do = torch.randn_like(q.detach())

    def step(call):
        o = call()
        torch.autograd.grad(o, (q, k, v), do)

    systems = {"fragmask": lambda: step(lambda: fragmask.attention(q, k, v))}
    if fa4 is not None:
        qt, kt, vt = (t.detach().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
        dot = do.transpose(1, 2).contiguous()

        def fa4_step():
            o = fa4(qt, kt, vt)
            o = o[0] if isinstance(o, tuple) else o
            torch.autograd.grad(o, (qt, kt, vt), dot)
        systems["fa4"] = fa4_step
    out.append(("fwd+bwd S=16384 H=16, no mask", systems))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--fa4", default=os.environ.get("FA4_SITE"))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch
    import fragmask
    fa4 = None
    if args.fa4:
        sys.path[:0] = [args.fa4, os.path.join(args.fa4, "nvidia_cutlass_dsl", "dsl_packages")]
        try:
            from flash_attn.cute import flash_attn_func as fa4
        except Exception as e:  # noqa: BLE001  (reported: its rows are left out)
            print(f"FA4 not importable: {type(e).__name__}: {e}", file=sys.stderr)
    gpu = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or 0)
    rows = []
    for name, systems in workloads(torch, fragmask, fa4):
        # fragmask first and again last, so that a drift of the board's temperature shows.
        order = list(systems.items()) + [("fragmask#2", systems["fragmask"])]
        for system, fn in order:
            r = dict(workload=name, system=system, **sustained(torch, fn, args.seconds, gpu))
            rows.append(r)
            time.sleep(2.0)   # let the board cool a little between systems
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    print(f"{'workload':<32} {'system':<10} {'ms':>8} {'MHz':>6} {'W':>6} {'capped':>7} {'C':>4}")
    for r in rows:
        print(f"{r['workload']:<32} {r['system']:<10} {r['ms']:8.3f} {r.get('clock_mhz', 0):6.0f} "
              f"{r.get('power_w', 0):6.0f} {r.get('capped', 0):7.2f} {r.get('temp_c', 0):4.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
