"""GPU ops as torch custom ops (``torch.library``), so ``torch.compile(fullgraph=True)``
traces through them and CUDA graphs capture them.

Each op takes tensors and plain values only: a ``Mask`` travels as its list tensors
(copied to the device once and cached on the Mask) plus ints. Tensors reach the
extension as ``(data_ptr, shape, strides, dtype)`` with torch's current stream and the
device index; torch allocates every output. The launches themselves need the host's
raw-pointer API (issue 12); until the extension exports it
(``_fragmask.attention_forward`` / ``_fragmask.lightning_decode``), the ops validate
their inputs and then raise NotImplementedError.

torch is imported here only, and only when an op is first called.
"""

from . import _fragmask

_DTYPES = ("bfloat16", "float16")
_LISTS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
          "kv_tile_offsets", "words")
_ops = None


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("fragmask's GPU ops need torch") from e
    return torch


def _raw(t):
    """(data_ptr, shape, strides in elements, dtype name) of a tensor."""
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), str(t.dtype).replace("torch.", ""))


def _stream(torch, device):
    return torch.cuda.current_stream(device).cuda_stream


def _register():
    """Defines the custom ops once (on first use)."""
    global _ops
    if _ops is not None:
        return _ops
    torch = _torch()
    from typing import List, Optional, Tuple

    Tensor = torch.Tensor

    @torch.library.custom_op("fragmask::attention", mutates_args=())
    def attention_op(
        q: Tensor, k: Tensor, v: Tensor,
        kv_num_blocks: Optional[Tensor], kv_indices: Optional[Tensor],
        full_kv_num_blocks: Optional[Tensor], full_kv_indices: Optional[Tensor],
        kv_tile_offsets: Optional[Tensor], words: Optional[Tensor],
        mask_meta: List[int], causal: bool, window: List[int], scale: float,
    ) -> Tuple[Tensor, Tensor]:
        # q, k, v are [B, H, S, D] views (strides carry the caller's layout); the
        # kernel writes a contiguous [B, H, Sq, D] O (the wrapper views it as q's layout).
        B, H, Sq, D = q.shape
        out = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
        lse = torch.empty((B, H, Sq), dtype=torch.float32, device=q.device)
        forward = getattr(_fragmask, "attention_forward", None)
        if forward is None:
            raise NotImplementedError(
                "fragmask.attention: this build of the extension has no GPU launch "
                "(the host's raw-pointer API is not wired yet)")
        lists, mask_id = None, None
        if kv_num_blocks is not None:
            lists = [_raw(t) for t in (kv_num_blocks, kv_indices, full_kv_num_blocks,
                                       full_kv_indices, kv_tile_offsets, words)]
            mask_id = mask_meta[-1]   # the Mask's registry id (see attention())
        forward(_raw(q), _raw(k), _raw(v), _raw(out), _raw(lse), lists, mask_id,
                causal, tuple(window), scale, _stream(torch, q.device), q.device.index)
        return out, lse

    @attention_op.register_fake
    def _(q, k, v, *args):
        B, H, Sq, D = q.shape
        return q.new_empty((B, H, Sq, D)), q.new_empty((B, H, Sq), dtype=torch.float32)

    @torch.library.custom_op("fragmask::lightning_decode", mutates_args=("kv",))
    def lightning_op(q: Tensor, k: Tensor, v: Tensor, kv: Tensor, slope: Tensor) -> Tensor:
        B, H, n, _ = q.shape
        out = torch.empty((B, H, n, v.shape[-1]), dtype=q.dtype, device=q.device)
        decode = getattr(_fragmask, "lightning_decode", None)
        if decode is None:
            raise NotImplementedError(
                "fragmask.lightning_decode: this build of the extension has no GPU launch "
                "(the host's raw-pointer API is not wired yet)")
        decode(_raw(q), _raw(k), _raw(v), _raw(kv), _raw(slope), _raw(out),
               _stream(torch, q.device), q.device.index)
        return out

    @lightning_op.register_fake
    def _(q, k, v, kv, slope):
        B, H, n, _ = q.shape
        return q.new_empty((B, H, n, v.shape[-1]))

    _ops = (attention_op, lightning_op)
    return _ops


def _check_tensors(torch, what, tensors, dtypes):
    for name, t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: {name} must be a torch.Tensor, not {type(t).__name__}")
        if t.device.type != "cuda":
            raise ValueError(f"{what}: {name} is on {t.device}; fragmask's kernels need "
                             "CUDA tensors")
        if str(t.dtype).replace("torch.", "") not in dtypes:
            raise TypeError(f"{what}: {name} has dtype {t.dtype}; expected one of "
                            f"{', '.join(dtypes)}")
    first = tensors[0][1]
    for name, t in tensors[1:]:
        if t.device != first.device:
            raise ValueError(f"{what}: {name} is on {t.device} but {tensors[0][0]} on "
                             f"{first.device}")


def _device_lists(torch, mask, device):
    """The Mask's lists on `device`, copied once and cached on the Mask."""
    key = str(torch.device(device))
    if key == "cuda":
        key = f"cuda:{torch.cuda.current_device()}"
    lists = mask._device_cache.get(key)
    if lists is None:
        if torch.compiler.is_compiling():
            raise RuntimeError("fragmask.attention: call mask.to(device) before "
                               "torch.compile traces code that uses the mask")
        arrays = [getattr(mask, n) for n in _LISTS]
        arrays[-1] = arrays[-1].view("=i4")  # uint32 words as int32 (same bits)
        lists = tuple(torch.from_numpy(a.copy()).to(device) for a in arrays)
        mask._device_cache[key] = lists
    return lists


def attention(q, k, v, mask=None, *, causal=False, window=None, scale=None,
              return_lse=False, layout="bhsd"):
    """Masked attention forward, ``softmax(q kᵀ · scale + mask) v`` (bf16 / fp16, GQA
    and MQA: k and v may have fewer heads, dividing q's).

    ``layout``: ``"bhsd"`` ([B, H, S, D], SDPA's) or ``"bshd"`` ([B, S, H, D],
    FlashAttention's); any strides with a unit-stride head dim. ``mask``: a
    ``fragmask.Mask`` built for (B or 1, H or 1, Sq, Sk) with the kernel's tile.
    ``window``: (left, right) keys, -1 = unbounded. Returns the output in q's layout,
    and with ``return_lse`` also the fp32 log-sum-exp ``[B, H, Sq]``.
    """
    torch = _torch()
    from ._mask import Mask

    what = "fragmask.attention"
    _check_tensors(torch, what, [("q", q), ("k", k), ("v", v)], _DTYPES)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"{what}: q, k, v dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{what}: {name} has rank {t.dim()}; expected 4 ({layout})")
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    elif layout != "bhsd":
        raise ValueError(f"{what}: layout must be 'bhsd' or 'bshd', not {layout!r}")
    B, H, Sq, D = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    if k.shape[0] != B or v.shape[:3] != k.shape[:3] or k.shape[3] != D:
        raise ValueError(f"{what}: k {tuple(k.shape)} and v {tuple(v.shape)} do not match "
                         f"q {tuple(q.shape)} (as [B, H, S, D])")
    if Hk == 0 or H % Hk:
        raise ValueError(f"{what}: q has {H} heads, not a multiple of k's {Hk}")
    if window is not None:
        left, right = window
        window = [int(left), int(right)]
    else:
        window = [-1, -1]
    scale = D ** -0.5 if scale is None else float(scale)
    lists = (None,) * 6
    meta = []
    if mask is not None:
        if not isinstance(mask, Mask):
            raise TypeError(f"{what}: mask must be a fragmask.Mask, not {type(mask).__name__}")
        mB, mH, mSq, mSk = mask._meta[:4]
        if (mSq, mSk) != (Sq, Sk) or mB not in (1, B) or mH not in (1, H):
            raise ValueError(f"{what}: the mask was built for {mask._meta[:4]} (B, H, Sq, Sk), "
                             f"the inputs are B={B}, H={H}, Sq={Sq}, Sk={Sk}")
        lists = _device_lists(torch, mask, q.device)
        meta = list(mask._meta)
    attention_op, _ = _register()
    out, lse = attention_op(q, k, v, *lists, meta, bool(causal), window, scale)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


def lightning_decode(q, k, v, kv, slope):
    """Lightning-attention decode step (write-up 003): ``kv ← exp(−slope)·kv + kᵀv;
    o = q·kv`` for n tokens in order. q, k: [B, H, n, D], v: [B, H, n, E] (bf16, fp16
    or fp32); kv: fp32 [B, H, D, E], updated in place; slope: fp32 [H]. Returns o
    [B, H, n, E]."""
    torch = _torch()
    what = "fragmask.lightning_decode"
    _check_tensors(torch, what, [("q", q), ("k", k), ("v", v)],
                   ("bfloat16", "float16", "float32"))
    _check_tensors(torch, what, [("kv", kv), ("slope", slope)], ("float32",))
    if kv.device != q.device:
        raise ValueError(f"{what}: kv is on {kv.device} but q on {q.device}")
    if not kv.is_contiguous():
        raise ValueError(f"{what}: kv is updated in place and must be contiguous")
    q, k, v = (t.contiguous() for t in (q, k, v))
    _, lightning_op = _register()
    return lightning_op(q, k, v, kv, slope.reshape(-1).contiguous())


def warmup(device=None, *, head_dims=(64, 128, 256), lightning=((96, 96, "bf16"),)):
    """Compiles and loads the kernels ahead of time (NVRTC, cached on disk), so that no
    later call compiles: call it before capturing a CUDA graph. ``lightning`` lists
    (D, E, dtype) of the lightning decode kernels to prepare."""
    torch = _torch()
    index = torch.cuda.current_device() if device is None else torch.device(device).index
    _fragmask.warmup(index if index is not None else torch.cuda.current_device(),
                     list(head_dims), [(int(d), int(e), str(t)) for d, e, t in lightning])
