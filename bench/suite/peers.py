"""The peers a workload runs beside, and why one is missing.

- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` (flash / cuDNN / efficient,
  as torch picks; with a dense bool mask where the mask is not causal).
- ``flex``: FlexAttention compiled (``torch.compile(flex_attention)``), Triton backend.
- ``flex_fa4``: FlexAttention with ``kernel_options={"BACKEND": "FLASH"}`` (FA4's CuTe
  kernels; needs FlashAttention-4 importable).
- ``fa4``: ``flash_attn.cute.flash_attn_func`` ([B, S, H, D]) where it supports the mask
  (none, causal, sliding window), ``fa4_varlen``: ``flash_attn_varlen_func`` with
  ``cu_seqlens`` (causal documents).
"""
import sys

_FA4 = None


def add_fa4_path(path):
    """Puts an unpacked FlashAttention-4 (``/tmp/fa4site``) on sys.path, if given."""
    if path:
        for p in (path, f"{path}/nvidia_cutlass_dsl/dsl_packages"):
            if p not in sys.path:
                sys.path.insert(0, p)


def fa4():
    """(module, None) or (None, reason) for ``flash_attn.cute``."""
    global _FA4
    if _FA4 is None:
        try:
            import flash_attn.cute as m  # noqa: F401
            from flash_attn.cute import flash_attn_func, flash_attn_varlen_func  # noqa: F401
            _FA4 = (m, None)
        except Exception as e:
            _FA4 = (None, f"flash_attn.cute not importable ({type(e).__name__}: {str(e)[:120]})")
    return _FA4


_FLEX = {}


def flex(backend):
    """(compiled flex_attention taking (q, k, v, block_mask, enable_gqa), None) or
    (None, reason). ``backend``: "triton" or "fa4"."""
    if backend not in _FLEX:
        try:
            import torch
            from torch.nn.attention.flex_attention import flex_attention
            if backend == "fa4":
                mod, why = fa4()
                if mod is None:
                    _FLEX[backend] = (None, why)
                    return _FLEX[backend]
                opts = {"BACKEND": "FLASH"}
            else:
                opts = None
            compiled = torch.compile(flex_attention, dynamic=False)

            def call(q, k, v, block_mask=None, enable_gqa=False, kernel_options=None):
                merged = dict(opts or {}, **(kernel_options or {})) or None
                return compiled(q, k, v, block_mask=block_mask, enable_gqa=enable_gqa,
                                kernel_options=merged)
            _FLEX[backend] = (call, None)
        except Exception as e:
            _FLEX[backend] = (None, f"{type(e).__name__}: {str(e)[:200]}")
    return _FLEX[backend]
