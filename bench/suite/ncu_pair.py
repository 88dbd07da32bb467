"""One attention call of fragmask or FlashAttention-4 between cudaProfilerStart/Stop, for
Nsight Compute's ``--profile-from-start off`` (bench/suite/ncu_pair.sh). Warm-up calls
(FA4's JIT compile, fragmask's plan and module load) run before the profiled one.

    python3 bench/suite/ncu_pair.py --system fragmask|fa4 --pass fwd|bwd [--causal]
        [--seqlen 16384] [--heads 16] [--head-dim 128] [--site DIR] [--fa4 DIR]
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", choices=("fragmask", "fa4"), required=True)
    ap.add_argument("--pass", dest="which", choices=("fwd", "bwd"), required=True)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--site", help="folder with the fragmask package")
    ap.add_argument("--fa4", help="unpacked FlashAttention-4")
    a = ap.parse_args()
    for p in (a.site, a.fa4, a.fa4 and f"{a.fa4}/nvidia_cutlass_dsl/dsl_packages"):
        if p:
            sys.path.insert(0, p)
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    # FA4 takes [B, S, H, D]; fragmask is given the same memory as layout="bshd".
    shape = (1, a.seqlen, a.heads, a.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
               .requires_grad_(a.which == "bwd") for _ in range(3))
    if a.system == "fa4":
        from flash_attn.cute import flash_attn_func

        def fwd():
            out = flash_attn_func(q, k, v, causal=a.causal)
            return out[0] if isinstance(out, tuple) else out
    else:
        import fragmask

        def fwd():
            return fragmask.attention(q, k, v, causal=a.causal, layout="bshd")
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
    for _ in range(2):
        out = fwd()
        if a.which == "bwd":
            out.backward(dout)
    torch.cuda.synchronize()
    if a.which == "fwd":
        torch.cuda.profiler.start()
        fwd()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    else:
        out = fwd()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        out.backward(dout)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    print(f"{a.system} {a.which} causal={a.causal} S={a.seqlen}: profiled one call", file=sys.stderr)


if __name__ == "__main__":
    main()
