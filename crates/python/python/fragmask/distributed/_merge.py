"""Merging partial attention states (o, lse) computed over disjoint key sets, in fp32:
``lse = log Σ exp(lse_i)``, ``o = Σ exp(lse_i - lse) · o_i``. A row no part sees
(every ``lse_i = -inf``) gives o = 0 and lse = -inf, as the kernels do. The torch
function is what ``fragmask.distributed`` runs; the numpy one is its CPU twin (and
the host crate's ``merge_states`` in f64)."""

import numpy as np


def merge_states(outs, lses):
    """``outs``: tensors ``[..., S, D]``; ``lses``: fp32 ``[..., S]`` (natural log).
    Returns (o in the first part's dtype, lse fp32)."""
    import torch

    if len(outs) != len(lses) or not outs:
        raise ValueError("merge_states needs as many lse as o, at least one")
    lse = torch.stack([x.float() for x in lses])
    top = lse.max(0).values
    safe = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w = torch.exp(lse - safe)                                    # -inf -> 0
    total = w.sum(0)
    o = sum(w[i][..., None] * outs[i].float() for i in range(len(outs)))
    o = torch.where(total[..., None] > 0, o / total.clamp_min(1e-38)[..., None],
                    torch.zeros_like(o))
    out_lse = torch.where(total > 0, safe + torch.log(total.clamp_min(1e-38)),
                          torch.full_like(total, float("-inf")))
    return o.to(outs[0].dtype), out_lse


def merge_states_numpy(outs, lses):
    """numpy twin of ``merge_states`` (float64)."""
    if len(outs) != len(lses) or not outs:
        raise ValueError("merge_states needs as many lse as o, at least one")
    lse = np.stack([np.asarray(x, np.float64) for x in lses])
    top = lse.max(0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore"):
        w = np.exp(lse - safe)
    w = np.where(np.isneginf(lse), 0.0, w)
    total = w.sum(0)
    o = sum(w[i][..., None] * np.asarray(outs[i], np.float64) for i in range(len(outs)))
    pos = total > 0
    o = np.where(pos[..., None], o / np.where(pos, total, 1.0)[..., None], 0.0)
    out_lse = np.where(pos, safe + np.log(np.where(pos, total, 1.0)), -np.inf)
    return o, out_lse
