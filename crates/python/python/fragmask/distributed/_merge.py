"""Merging partial attention states (o, lse) computed over disjoint key sets, in fp32:
``lse = log Σ exp(lse_i)``, ``o = Σ exp(lse_i - lse) · o_i``. A row no part sees
(every ``lse_i = -inf``) gives o = 0 and lse = -inf, as the kernels do.

``merge_into_`` is what ``fragmask.distributed`` runs for each part of a rank's keys:
one partial state merged into the running one in place, on CUDA by fragmask's combine
component (``fragmask_host::merge``: one kernel, fp32 math, o rounded once), else in
torch. ``merge_states`` (torch, any number of parts) and ``merge_states_numpy`` (its
f64 twin) are the general merges."""

import warnings

import numpy as np

# False: merge_into_ takes the torch path on CUDA too (the tests compare both).
FUSED = True
# Why the fused merge was given up on this process (the first launch error), or None.
FUSED_ERROR = None
_LAUNCH = None


def _launcher():
    global _LAUNCH
    if _LAUNCH is None:
        from .._device import API

        _LAUNCH = API.get("merge_into_launch") or False
    return _LAUNCH


def _rows(t, rows):
    if rows is None:
        return t
    if isinstance(rows, slice):
        return t[:, :, rows]
    return t.index_select(2, rows)


def merge_into_torch_(o, lse, o_p, lse_p, rows=None):
    """``merge_into_`` in torch elementwise ops: lse' = logaddexp(lse, lse_p) in fp32,
    o' = lerp(o, o_p, e^(lse_p - lse')) (the two weights sum to 1: one pass over o in
    fp32 opmath, rounded once; the weight is carried in o's dtype)."""
    import torch

    oa, la = _rows(o, rows), _rows(lse, rows)
    new = torch.logaddexp(la, lse_p)
    safe = torch.where(torch.isfinite(new), new, torch.zeros_like(new))
    w = torch.exp(lse_p - safe).unsqueeze(-1).to(o.dtype)
    if rows is None or isinstance(rows, slice):
        oa.lerp_(o_p, w)
        la.copy_(new)
    else:
        o.index_copy_(2, rows, torch.lerp(oa, o_p, w))
        lse.index_copy_(2, rows, new)


def _fused_ok(o, lse, o_p, lse_p, rows):
    import torch

    if not (FUSED and o.is_cuda and o.dtype in (torch.bfloat16, torch.float16)):
        return False
    if o_p.dtype != o.dtype or lse.dtype != torch.float32 or lse_p.dtype != torch.float32:
        return False
    if o.dim() != 4 or o.stride(3) != 1 or o.shape[3] % 4 or o.shape[3] > 1024:
        return False
    if isinstance(rows, torch.Tensor) and (rows.dtype != torch.int64 or not rows.is_cuda):
        return False
    devices = {t.device for t in (o, lse, o_p, lse_p)}
    return len(devices) == 1 and bool(_launcher())


def merge_into_(o, lse, o_p, lse_p, rows=None):
    """Merges the partial state ``(o_p [B, H, R, D], lse_p fp32 [B, H, R])`` into
    ``(o [B, H, S, D], lse fp32 [B, H, S])`` in place at ``rows``: None (R = S), a
    ``slice`` of R rows, or an int64 tensor of R distinct row numbers on o's device.
    A row neither part sees keeps o = 0, lse = -inf."""
    global FUSED_ERROR
    import torch

    B, H, S, D = o.shape
    R = o_p.shape[2]
    if tuple(o_p.shape) != (B, H, R, D) or tuple(lse.shape) != (B, H, S) \
            or tuple(lse_p.shape) != (B, H, R):
        raise ValueError(f"merge_into_: o {tuple(o.shape)}, lse {tuple(lse.shape)}, "
                         f"partial o {tuple(o_p.shape)}, partial lse {tuple(lse_p.shape)}")
    if rows is None:
        if R != S:
            raise ValueError(f"merge_into_: {R} partial rows for {S} rows and no rows given")
        offset, index = 0, None
    elif isinstance(rows, slice):
        offset, stop, step = rows.indices(S)
        if step != 1 or stop - offset != R:
            raise ValueError(f"merge_into_: rows {rows} do not name {R} consecutive rows")
        index = None
    else:
        if rows.dim() != 1 or rows.numel() != R:
            raise ValueError(f"merge_into_: {rows.numel()} row numbers for {R} partial rows")
        offset, index = 0, rows
    if FUSED_ERROR is None and _fused_ok(o, lse, o_p, lse_p, rows):
        if o_p.stride(3) != 1:
            o_p = o_p.contiguous()
        if index is not None:
            index = index.contiguous()
        dev = o.device.index if o.device.index is not None else torch.cuda.current_device()
        try:
            _launcher()(
                (o.data_ptr(), tuple(o.shape), tuple(o.stride())),
                (lse.data_ptr(), tuple(lse.shape), tuple(lse.stride())),
                (o_p.data_ptr(), tuple(o_p.shape), tuple(o_p.stride())),
                (lse_p.data_ptr(), tuple(lse_p.shape), tuple(lse_p.stride())),
                0 if index is None else index.data_ptr(), int(offset),
                torch.cuda.current_stream(o.device).cuda_stream, dev,
                o.dtype == torch.float16)
            return
        except RuntimeError as e:       # no kernel on this process: torch from now on
            FUSED_ERROR = f"{type(e).__name__}: {e}"
            warnings.warn(f"fragmask.distributed: the GPU state merge failed, merging in "
                          f"torch ({FUSED_ERROR})", RuntimeWarning, stacklevel=2)
    merge_into_torch_(o, lse, o_p, lse_p, rows)


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
