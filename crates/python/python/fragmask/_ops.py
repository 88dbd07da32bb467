"""GPU ops: eager calls straight into the extension, torch custom ops (``torch.library``)
for what traces, and plan objects for loops of calls.

Each op takes tensors and plain values only: a ``Mask`` travels as its list tensors
(on the device once, cached on the Mask) plus ints. Tensors reach the extension as
``(data_ptr, shape, strides)`` (or addresses alone, against a plan checked once) with
torch's raw current stream and the device index; dtypes travel as codes; torch
allocates every output.

Eager calls of ``attention``, ``decode`` and ``lightning_decode`` on plain CUDA tensors
skip the custom-op dispatch: when nothing traces or transforms the call (no
torch.compile / export, no dispatch or function mode such as FakeTensorMode, no
functorch transform, no JIT trace) the wrapper launches directly, through the same
extension functions the registered ops' implementations call, so both give the same
results and errors. With autograd through the inputs, ``attention`` runs a
``torch.autograd.Function`` whose forward and backward call the extension directly.
Under ``torch.set_default_device`` alone the ops and the plans' ``run`` go on with
torch-function handling off, so they too take the fast path (``_default_device_probe``).
Everything else goes through the registered ops (``register_autograd`` included), which
opcheck, ``torch.compile(fullgraph=True)`` and CUDA graphs use.

The extension's device API (functions taking device addresses) is claimed once by
``_device`` at import; nothing a user reaches by importing the extension takes one.

torch is imported here only, and only when an op is first called.
"""

import weakref

from . import _fragmask
from ._device import API as _API
from ._mask import BlockLists, Mask

_DTYPES = ("bfloat16", "float16")
_ops = None
_backward_op = None
_decode_op = None
_T = None  # torch, once imported
_launch = _API["attention_launch"]
_backward_launch = _API["attention_backward_launch"]
_decode_launch = _API["decode_launch"]
_lightning_launch = _API["lightning_decode"]
# False: every call takes the registered ops (the tests compare both paths).
_FAST = True


def _torch():
    global _T
    if _T is None:
        try:
            import torch
        except ImportError as e:
            raise ImportError("fragmask's GPU ops need torch") from e
        _T = torch
        _init_fast(torch)
        _init_autograd(torch)
        # Registered now, at first use, so that no later call registers them (the fast
        # path never reaches _register, and torch.compile cannot trace a registration).
        _register()
        _register_decode()
    return _T


_DTYPE_NAMES = {}


def _dtype_name(dtype):
    """The extension's code of a torch dtype (its name, looked up once per dtype)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _raw(t):
    """(data_ptr, shape, strides in elements, dtype code) of a tensor."""
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), _dtype_name(t.dtype))


def _raw_stream(torch):
    """device index -> the raw handle of torch's current stream on it (torch's private
    getter when it has one: no Stream object per call)."""
    getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if getter is not None:
        return getter
    return lambda device: torch.cuda.current_stream(device).cuda_stream


_i32 = None
_Tensor = _bf16 = _f16 = _f32 = _get_stream = _get_device = _raw_alloc = _raw_delete = None
_empty_like = _contiguous = _capturing = None
_is_compiling = _plain = _untraced = None
_default_device_only = _no_torch_function = None
# The C check that a torch-function mode is on (a builtin: no Python frame per call), before
# the default-device probe; never true where that probe is missing.
_function_mode_on = bool
_RAW_ALLOC = None


def _init_fast(torch):
    """Binds what the eager fast path reads on every call."""
    global _Tensor, _bf16, _f16, _f32, _i32, _get_stream, _get_device, _raw_alloc, _raw_delete
    global _is_compiling, _plain, _untraced, _RAW_ALLOC, _empty_like, _contiguous, _capturing
    _Tensor, _bf16, _f16, _f32 = torch.Tensor, torch.bfloat16, torch.float16, torch.float32
    # Outputs shaped like an input: empty_like parses no shape (about a third less host
    # time than new_empty per allocation).
    _empty_like, _contiguous = torch.empty_like, torch.contiguous_format
    # torch's C check (is_current_stream_capturing's body) where it has it.
    _capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing",
                         torch.cuda.is_current_stream_capturing)
    _i32 = torch.int32
    _get_stream = _raw_stream(torch)
    _is_compiling = torch.compiler.is_compiling
    C = torch._C
    # A split workspace lives in a block of torch's caching allocator taken and given
    # back around the launch (stream-ordered, graph pools included, as a tensor's), not
    # in a tensor object: about 2 us less per call.
    _get_device = getattr(C, "_cuda_getDevice", None)
    _raw_alloc = getattr(C, "_cuda_cudaCachingAllocator_raw_alloc", None)
    _raw_delete = getattr(C, "_cuda_cudaCachingAllocator_raw_delete", None)
    if _get_device is None or _raw_alloc is None or _raw_delete is None:
        _get_device = lambda: -1  # noqa: E731  (never the tensors' device: new_empty)
    _RAW_ALLOC = (_raw_alloc, _raw_delete)
    probes = [getattr(C, n, None) for n in ("_len_torch_dispatch_stack",
                                            "_is_torch_function_mode_enabled",
                                            "_are_functorch_transforms_active",
                                            "_get_tracing_state")]
    if any(p is None for p in probes):
        _plain = _untraced = None  # an unknown torch: always take the registered ops
        return
    dispatch_modes, function_modes, functorch, tracing = probes
    grad = C.is_grad_enabled
    global _default_device_only, _no_torch_function, _function_mode_on
    _default_device_only = _default_device_probe(torch, function_modes)
    _no_torch_function = getattr(C, "DisableTorchFunction", None)
    if _no_torch_function is None:
        _default_device_only = None
    if _default_device_only is not None:
        _function_mode_on = function_modes

    def plain(q, k, v):
        """Nothing intercepts a call on q, k, v: the fast path is the op's semantics."""
        return not (_is_compiling() or dispatch_modes() or function_modes() or functorch()
                    or tracing() is not None
                    or (grad() and (q.requires_grad or k.requires_grad
                                    or v.requires_grad)))

    def untraced():
        """Nothing traces or transforms the call (autograd may record it)."""
        return not (_is_compiling() or dispatch_modes() or function_modes() or functorch()
                    or tracing() is not None)

    _plain = plain
    _untraced = untraced


def _default_device_probe(torch, function_modes):
    """A check that torch-function modes are active and every one is torch's default-device
    mode (``None`` where this torch lacks the probes).

    ``torch.set_default_device`` and ``with torch.device(...)`` push a ``DeviceContext``
    mode, which only gives a device to factory calls without one. fragmask's ops make every
    tensor from an input (``new_empty``, ``empty_like``) or with an explicit device, so they
    mean the same under it. The public ops then run with torch-function handling off
    (``torch._C.DisableTorchFunction``): the eager fast path instead of the registered ops,
    and no Python mode call per tensor method inside. Any other mode keeps them on. Each
    entry (the three ops, the plans' ``run``) re-enters itself inline: a decorator would
    add a Python frame to every call without modes."""
    C = torch._C
    depth = getattr(C, "_len_torch_function_stack", None)
    mode_at = getattr(C, "_get_function_stack_at", None)
    enabled = getattr(C, "_is_torch_function_enabled", None)   # False inside the switch-off
    try:
        from torch.utils._device import DeviceContext
    except ImportError:
        return None
    if depth is None or mode_at is None or enabled is None:
        return None

    def default_device_only():
        return (function_modes() and enabled() and not _is_compiling()
                and all(type(mode_at(i)) is DeviceContext for i in range(depth())))

    return default_device_only


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
        q_num_blocks: Optional[Tensor], q_indices: Optional[Tensor],
        full_q_num_blocks: Optional[Tensor], full_q_indices: Optional[Tensor],
        q_tile_offsets: Optional[Tensor], q_words: Optional[Tensor],
        mask_meta: List[int], causal: bool, window: List[int], scale: float, splits: int,
        deterministic: bool,
    ) -> Tuple[Tensor, Tensor]:
        # q, k, v are [B, H, S, D] views (strides carry the caller's layout); the
        # kernel writes O in q's memory order where q is dense (a bshd caller's O is
        # contiguous [B, S, H, D] once the wrapper transposes the view back), else contiguous.
        # The q_* lists (the mask's transposed lists) are not read here: they are inputs
        # so that autograd saves them for fragmask::attention_backward, as `deterministic`
        # (the backward's mode, decided when the forward is called) is.
        B, H, Sq, D = q.shape
        out = torch.empty_like(q)
        lse = torch.empty((B, H, Sq), dtype=torch.float32, device=q.device)
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.dtype not in (torch.bfloat16, torch.float16) or t.dtype != q.dtype:
                raise TypeError(f"fragmask.attention: {name} is "
                                f"{str(t.dtype).replace('torch.', '')}; the attention "
                                "kernel takes bfloat16 or float16, the same for q, k, v")
        lists, mask_id = None, 0
        if kv_num_blocks is not None:
            lists = tuple(t.data_ptr() for t in (kv_num_blocks, kv_indices,
                                                 full_kv_num_blocks, full_kv_indices,
                                                 kv_tile_offsets, words))
            mask_id = mask_meta[8]    # the Mask's registry id (see attention())
        device = q.device.index
        args = ((q.data_ptr(), q.shape, q.stride()), (k.data_ptr(), k.shape, k.stride()),
                (v.data_ptr(), v.shape, v.stride()), out.data_ptr(), lse.data_ptr(),
                mask_id, lists, causal, window[0], window[1], scale, False,
                _get_stream(device), device, q.dtype == torch.float16, splits)
        o_strides = tuple(out.stride()[:3])
        need = _launch(*args, out_strides=o_strides)
        if need is not None:  # split-KV: the workspace it asked for, then the launch
            _, n_o, n_lse = need
            ws_o = torch.empty((n_o,), dtype=torch.float32, device=q.device)
            ws_lse = torch.empty((n_lse,), dtype=torch.float32, device=q.device)
            _launch(*args, ws_o.data_ptr(), ws_lse.data_ptr(), out_strides=o_strides)
        return out, lse

    @attention_op.register_fake
    def _(q, k, v, *args):
        B, H, Sq, D = q.shape
        return torch.empty_like(q), q.new_empty((B, H, Sq), dtype=torch.float32)

    @torch.library.custom_op("fragmask::lightning_decode", mutates_args=("kv",))
    def lightning_op(q: Tensor, k: Tensor, v: Tensor, kv: Tensor, slope: Tensor) -> Tensor:
        B, H, n, _ = q.shape
        out = torch.empty((B, H, n, v.shape[-1]), dtype=q.dtype, device=q.device)
        device = q.device.index
        _lightning_launch(_raw(q), _raw(k), _raw(v), _raw(kv), _raw(slope), _raw(out),
                          _get_stream(device), device)
        return out

    @lightning_op.register_fake
    def _(q, k, v, kv, slope):
        B, H, n, _ = q.shape
        return q.new_empty((B, H, n, v.shape[-1]))

    _register_backward(torch, attention_op)
    _ops = (attention_op, lightning_op)
    return _ops


def _view(t):
    return (t.data_ptr(), t.shape, t.stride())


def _dout_as_is(t):
    """Whether the backward reads dO `t` (a [B, H, S, D] view of 2-byte elements) where it
    lies: D contiguous, the other strides positive multiples of 16 bytes, a 16-byte-aligned
    base (the host's TMA rule, ``encode_strided_map``). A ``layout="bshd"`` caller's
    contiguous dO is such a view; copying it cost a kernel of 0.087 ms per backward at
    S = 16384, H = 16, D = 128 (one H100, Nsight Compute). Any other view is copied."""
    sb, sh, ss, sd = t.stride()
    return (sd == 1 and sb > 0 and sh > 0 and ss > 0 and sb % 8 == 0 and sh % 8 == 0
            and ss % 8 == 0 and t.data_ptr() % 16 == 0)


def _register_backward(torch, attention_op):
    """``fragmask::attention_backward`` and the autograd formula of ``fragmask::attention``
    (once, from _register)."""
    global _backward_op
    from typing import List, Optional, Tuple

    Tensor = torch.Tensor

    @torch.library.custom_op("fragmask::attention_backward", mutates_args=())
    def attention_backward_op(
        q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, dout: Tensor,
        kv_num_blocks: Optional[Tensor], kv_indices: Optional[Tensor],
        full_kv_num_blocks: Optional[Tensor], full_kv_indices: Optional[Tensor],
        kv_tile_offsets: Optional[Tensor], words: Optional[Tensor],
        q_num_blocks: Optional[Tensor], q_indices: Optional[Tensor],
        full_q_num_blocks: Optional[Tensor], full_q_indices: Optional[Tensor],
        q_tile_offsets: Optional[Tensor], q_words: Optional[Tensor],
        mask_meta: List[int], causal: bool, window: List[int], scale: float,
        deterministic: bool,
    ) -> Tuple[Tensor, Tensor, Tensor]:
        # dQ, dK, dV in the memory order of the op's q and k ([B, H(kv), S, D] views; a bshd
        # caller's are transposed views of [B, S, H, D] memory), written there by the kernels.
        dq, dk, dv = _grads_like(torch, q, k, v)
        lists = tlists = None
        mask_id = 0
        if kv_num_blocks is not None:
            if q_num_blocks is None or len(mask_meta) < 10:
                raise RuntimeError(
                    "fragmask.attention backward: the mask has no transposed lists; build it "
                    "with transposed=True or call mask.with_transposed()")
            lists = tuple(t.data_ptr() for t in (kv_num_blocks, kv_indices, full_kv_num_blocks,
                                                 full_kv_indices, kv_tile_offsets, words))
            tlists = tuple(t.data_ptr() for t in (q_num_blocks, q_indices, full_q_num_blocks,
                                                  full_q_indices, q_tile_offsets, q_words))
            mask_id = mask_meta[9]    # a registry entry of the mask's geometry with q_* lists
        device = q.device.index
        if not _dout_as_is(dout):     # here, not in the autograd formula: traced, it has no data
            dout = dout.contiguous()
        _backward_launch(_view(q), _view(k), _view(v), _view(out), lse.data_ptr(),
                         _view(dout), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), mask_id,
                         lists, tlists, causal, window[0], window[1], scale,
                         _get_stream(device), device, q.dtype == torch.float16,
                         _grad_strides(dq, dk), deterministic)
        return dq, dk, dv

    @attention_backward_op.register_fake
    def _(q, k, v, *args):
        return _grads_like(torch, q, k, v)

    def setup_context(ctx, inputs, output):
        q, k, v = inputs[:3]
        mask_lists = inputs[3:15]
        ctx.meta, ctx.causal, ctx.window, ctx.scale = inputs[15:19]
        ctx.deterministic = inputs[20]
        out, lse = output
        ctx.mark_non_differentiable(lse)
        ctx.save_for_backward(q, k, v, out, lse, *mask_lists)

    def backward(ctx, grad_out, grad_lse):
        q, k, v, out, lse, *mask_lists = ctx.saved_tensors
        if grad_out is None:      # only lse was used: it is not differentiable
            grad_out = torch.zeros_like(out)
        dq, dk, dv = attention_backward_op(q, k, v, out, lse, grad_out,
                                           *mask_lists, ctx.meta, ctx.causal, ctx.window,
                                           ctx.scale, ctx.deterministic)
        return (dq, dk, dv) + (None,) * 18

    torch.library.register_autograd("fragmask::attention", backward,
                                    setup_context=setup_context)
    _backward_op = attention_backward_op


def _count_arg(what, name, value, lo, hi=2**31 - 1):
    """An int argument in lo..=hi (not a bool, str or float); errors name it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: {name} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{what}: {name}={value} must be in {lo}..={hi}")
    return value


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
    """The Mask's lists on `device`, copied once and cached on the Mask (a mask packed on
    that GPU has them there already: views of its buffers)."""
    device = torch.device(device)
    index = device.index
    if device.type == "cuda" and index is None:
        index = torch.cuda.current_device()
    key = f"cuda:{index}" if device.type == "cuda" else str(device)
    lists = mask._device_cache.get(key)
    if lists is None:
        gpu = mask._gpu
        if gpu is not None and device.type == "cuda" and gpu[2] == index:
            plan, buf, _ = gpu
            rows, tiles, _, _, _, words_at, mb, nb = plan.sizes
            B, H = mask._meta[:2]
            lists = (*BlockLists.from_buffer(buf, rows, tiles, (B, H, mb), (B, H, mb, nb)),
                     buf[words_at:])
        elif torch.compiler.is_compiling():
            raise RuntimeError("fragmask.attention: call mask.to(device) before "
                               "torch.compile traces code that uses the mask")
        else:
            arrays = [*mask.lists, mask.words]
            arrays[-1] = arrays[-1].view("=i4")  # uint32 words as int32 (same bits)
            lists = tuple(torch.from_numpy(a.copy()).to(device) for a in arrays)
            _copy_dispatch_order(torch, mask, mask._packed, False, lists[0], key, device)
        mask._device_cache[key] = lists
        if device.type == "cuda":
            mask._device_ptrs[index] = tuple(t.data_ptr() for t in lists)
    return lists


def _copy_dispatch_order(torch, mask, packed, transposed, first, key, device):
    """Copies the largest-first dispatch order of a host mask's lists (``packed``'s forward
    row blocks, or with ``transposed`` its transposed lists' key tiles:
    ``Packed.dispatch_order``) to ``device`` beside those lists (``first``: their first,
    just copied there), keeps it on ``mask`` under ``key``, and records it with the
    extension, so that the plans run it without uploading it (a plan first made under
    CUDA-graph capture, which may upload nothing, included). Nothing where the order is
    the kernels' own."""
    hit = packed.dispatch_order(transposed)
    if hit is None:
        return
    raw, dims = hit
    order = torch.frombuffer(raw, dtype=torch.int32).reshape(dims).to(device)
    mask._device_cache[key + ":order"] = order
    _API["record_dispatch_order"](packed.registry_id, first.data_ptr(), order.data_ptr())


def _backward_id(planned, src):
    """The registry id the backward plans with for transposed lists `src` built: the host
    copy's once the GPU transposition was read back into it (``Mask._packed``; the same
    lists, so the paired key blocks' table holds the device's tile offsets), else
    `planned` (the transposition's geometry, empty lists: unpaired). Plain attributes
    only: torch.compile traces this."""
    return src._meta[8] if src._t_read else planned


def _pairs_from_host(mask):
    """Whether a mask without transposed lists gets them from the CPU at its first
    backward rather than from the GPU packer: a 64x64 mask whose lists are on the host
    (packed there, or read back with ``to("cpu")``), outside CUDA-graph capture. Its
    backward then pairs key blocks, whose table is built from host lists; lists built on
    the GPU stay there and the backward runs unpaired (1.08-1.11x the paired time on
    write-up 002's masks, bench/results/session-2026-11-28b/). The CPU transposes once
    per mask (at write-up 002's shape on a 2-core machine, whole blocks: 14-31 ms for a
    process's first mask, then 2.5-12 ms, beside from_blocks' own 3-38 ms;
    bench/results/session-2026-11-28c/cpu_transpose.txt): a mask with partial tiles
    built every step that would rather not pay it takes ``with_transposed(device="cuda")``
    first (the GPU packer's lists: unpaired); a mask of whole tiles only is transposed by the CPU
    whichever way (Mask._with_transposed_gpu)."""
    return (mask._host is not None and tuple(mask._meta[4:6]) == (64, 64)
            and not (_capturing is not None and _capturing()))


def _device_transposed(torch, mask, device):
    """(the mask's transposed lists on `device`, the registry id of a mask with them:
    ``_backward_id``) for the backward, built once and cached on the Mask: views of a GPU
    transposition's buffer, copies of host lists, or, for a mask without them, the GPU
    packer's transposed lists of its device lists (``with_transposed(device=...)``)."""
    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = f"cuda:{index}:transposed"
    hit = mask._device_cache.get(key)
    if hit is not None:
        return hit[0], _backward_id(hit[1], hit[2])
    src = mask
    if mask._gpu_t is None and not mask.has_transposed:
        if torch.compiler.is_compiling():
            raise RuntimeError(
                "fragmask.attention: the mask has no transposed lists, which the backward "
                "pass needs: build it with transposed=True, or call mask = "
                "mask.with_transposed() and mask.to(device) before torch.compile traces it")
        if _pairs_from_host(mask):
            src = mask._with_transposed_host()   # host lists: the backward pairs key blocks
        else:
            src = mask.with_transposed(device=torch.device("cuda", index))
    gpu_t = src._gpu_t
    if gpu_t is not None and gpu_t[2] == index:
        plan, buf, _ = gpu_t
        q_rows, tiles, _, _, _, words_at, mb, nb = plan.sizes
        B, H = src._meta[:2]
        lists = (*BlockLists.from_buffer(buf, q_rows, tiles, (B, H, nb), (B, H, nb, mb)),
                 buf[words_at:])
        bwd_id = plan.registry_id
    elif torch.compiler.is_compiling():
        raise RuntimeError("fragmask.attention: call mask.to(device) before torch.compile "
                           "traces a backward through the mask")
    else:
        arrays = [*src.transposed_lists, src.q_words]
        arrays[-1] = arrays[-1].view("=i4")  # uint32 words as int32 (same bits)
        lists = tuple(torch.from_numpy(a.copy()).to(device) for a in arrays)
        bwd_id = src._packed.registry_id
        _copy_dispatch_order(torch, mask, src._packed, True, lists[0], key, device)
    mask._device_cache[key] = (lists, bwd_id, src)   # src keeps the registry entry alive
    return lists, _backward_id(bwd_id, src)


def _deterministic(torch, what, deterministic):
    """The backward's mode for a call's ``deterministic`` keyword: ``True`` or ``False``
    as given; ``None``: ``torch.are_deterministic_algorithms_enabled()`` now (PyTorch's
    convention; the caller reads it when the forward is called and keeps it for the
    backward). Anything else is a ``TypeError``."""
    if deterministic is None:
        return bool(torch.are_deterministic_algorithms_enabled())
    if deterministic is True or deterministic is False:
        return deterministic
    raise TypeError(f"{what}: deterministic must be None, True or False, not "
                    f"{type(deterministic).__name__}")


def attention(q, k, v, mask=None, *, causal=False, window=None, scale=None,
              return_lse=False, layout="bhsd", splits=None, deterministic=None):
    """Masked attention forward, ``softmax(q kᵀ · scale + mask) v`` (bf16 / fp16, GQA
    and MQA: k and v may have fewer heads, dividing q's).

    ``layout``: ``"bhsd"`` ([B, H, S, D], SDPA's) or ``"bshd"`` ([B, S, H, D],
    FlashAttention's); any strides with a unit-stride head dim. The output is written
    contiguous in the layout asked for ([B, S, H, D] with ``"bshd"``: no transpose to
    copy before a ``reshape(B, S, H * D)``); dQ, dK and dV are written in the inputs' own
    memory order (contiguous [B, S, H, D] gradients for contiguous bshd inputs), and dO is
    read in place in either layout. ``mask``: a
    ``fragmask.Mask`` built for (B or 1, H or 1, Sq, Sk) with the kernel's tile.
    ``window``: (left, right) keys, -1 = unbounded. Returns the output in q's layout,
    and with ``return_lse`` also the fp32 log-sum-exp ``[B, H, Sq]`` (not
    differentiable).

    Decode shapes (few query rows, many keys) run the split-KV forward: the split count
    is planned from the row blocks, the longest row's key steps and the SM count;
    ``splits`` (1 to 128) overrides it. Long calls at head dim 64 cut their last partial
    wave into split-KV pieces by default (the split tail, docs/architecture.md; a plan's
    ``tail``); ``splits=1`` runs the plain one-split grid without it.

    Differentiable in q, k and v (``fragmask::attention_backward``, issue 13's backward
    kernels): the backward of a masked call reads the mask's transposed lists; a mask
    without them gets them on the GPU at the first call that needs them (build it with
    ``transposed=True``, or ``with_transposed()`` and ``to(device)``, before
    ``torch.compile`` or CUDA-graph capture). Eager calls (with or without autograd)
    launch straight from a ``torch.autograd.Function``; traced ones go through the
    registered ops.

    ``deterministic``: the backward's mode. ``True`` orders the dQ reductions (a semaphore
    per query step: ``BackwardOptions::deterministic``), so dQ, dK and dV are bit-identical
    run to run; it costs extra time (see docs/backward.md, "Deterministic mode"). ``False``
    keeps the default reductions, whose order (and so dQ's last bits) may differ run to
    run. ``None`` (default) follows ``torch.are_deterministic_algorithms_enabled()``
    (``torch.use_deterministic_algorithms(True)``), read when the forward is called; the
    backward of that call runs in the mode decided then. Masks with documents then run
    their tile lists (the documents grid has no deterministic order); 64x64 masks keep
    their paired key blocks, which take their turns by the pair table's ranks.
    """
    if _T is None:
        _torch()
    if _function_mode_on() and _default_device_only():
        with _no_torch_function():
            return attention(q, k, v, mask, causal=causal, window=window, scale=scale,
                             return_lse=return_lse, layout=layout, splits=splits,
                             deterministic=deterministic)
    # Eager fast path: plain bf16 or fp16 CUDA tensors of one device, nothing tracing or
    # transforming the call (see the module docs). Shapes, strides, the mask's fit,
    # the window and the scale are checked by the extension's plan before it launches;
    # what this path cannot vouch for (other dtypes or devices, other masks, layouts or
    # ranks) takes the checked path below through the registered op.
    if (_FAST and type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor
            and (q.dtype is _bf16 or q.dtype is _f16) and k.dtype is q.dtype and v.dtype is q.dtype
            and _untraced is not None and _untraced()):
        device = q.get_device()
        if (device >= 0 and k.get_device() == device and v.get_device() == device
                and q.dim() == 4 and k.dim() == 4 and v.dim() == 4
                and (mask is None or type(mask) is Mask)
                and (layout == "bhsd" or layout == "bshd")
                and (splits is None or (type(splits) is int and 1 <= splits <= 128))
                and (deterministic is None or deterministic is True
                     or deterministic is False)):
            n = 0 if splits is None else splits
            bshd = layout == "bshd"
            if _grad() and (q.requires_grad or k.requires_grad or v.requires_grad):
                if mask is not None:
                    _check_backward_tile("fragmask.attention", mask, q.shape[3])
                entry = _forward_plan(q, k, v, mask, causal, window, scale, bshd, device, n)
                if deterministic is None:    # torch's flag, read at the forward
                    deterministic = _deterministic_enabled()
                # Only out is an output unless the lse is asked for: one output for
                # autograd to wrap, no non-differentiable one to mark.
                return _attention_apply(q, k, v, entry, mask, bool(return_lse),
                                        deterministic)
            if (n == 0 and mask is None and not causal and window is None
                    and q.shape[1 if bshd else 2] == 1):
                routed = _decode_route(q, k, v, bshd, scale, device, return_lse)
                if routed is not None:
                    out, lse = routed
                    return (out, lse) if return_lse else out
            entry = _forward_plan(q, k, v, mask, causal, window, scale, bshd, device, n)
            out, lse = _forward_run(entry, q, k, v, return_lse, device)
            return (out, lse) if return_lse else out
    return _attention_op_path(q, k, v, mask, causal, window, scale, return_lse, layout,
                              splits, deterministic)


def _decode_shapes(q, k, v, bshd):
    """A one-row attention call as a decode call without copies: (q's and the caches'
    shapes as decode takes them, the lse shape of the attention call, whether the caches
    are head-major), or None when the strides do not allow it. [B, S, H, D] contiguous
    tensors are decode's layout already; [B, H, 1, D] q is [B, 1, H, D] memory, and
    contiguous [B, Hkv, Sk, D] k and v are head-major caches: the decode shape
    ``DecodeShape::from_attention`` gives the CLI's attention entry point too, so both
    plan the same splits."""
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        return None
    return _decode_form(q.shape, k.shape, v.shape, bshd)


def _decode_form(qs, ks, vs, bshd):
    """:func:`_decode_shapes` of contiguous tensors of shapes qs, ks, vs (no torch)."""
    if vs != ks:
        return None
    if bshd:
        return qs, ks, (qs[0], qs[2], 1), False
    B, H, _, D = qs
    return (B, 1, H, D), ks, (B, H, 1), True


def _decode_route(q, k, v, bshd, scale, device, need_lse):
    """Decode shapes (one query row, no mask, window or causal bound) sent to the decode
    kernel by the attention entry point: (out in q's layout, lse [B, H, 1] or None), or
    None when the call is not one decode takes as it is."""
    shapes = _decode_shapes(q, k, v, bshd)
    if shapes is None:
        return None
    qs, ks, lse_shape, head_major = shapes
    dtype = q.dtype
    scale = 0.0 if scale is None else float(scale)
    if scale != scale or scale < 0:
        return None   # the attention forward names the bad scale (decode's 0 is default)
    try:
        hit = _decode_hit(device, qs, ks, ks, dtype, dtype, dtype, None, None, None, 0, -1,
                          -1, scale, 0, 0, head_major)
    except ValueError:
        return None   # a shape decode does not take: the split-KV forward checks it
    out, lse = _decode_plain_launch(hit, q, k, v, device, need_lse)
    return out, (None if lse is None else lse.view(lse_shape))


def _mask_ptrs(mask, q, device):
    """(registry id, device addresses of the six lists) of a Mask on `device`."""
    ptrs = mask._device_ptrs.get(device)
    if ptrs is None:
        _device_lists(_T, mask, q.device)
        ptrs = mask._device_ptrs[device]
    return mask._meta[8], ptrs


_BACKWARD_REFUSALS = {}   # (head dim, block_m, block_n) -> why the backward refuses, or ""


def _check_backward_tile(what, mask, D):
    """Refuses, before the forward runs, a call that will need a backward (grad enabled,
    an input requiring grad) on a mask whose tile the backward cannot read at head dim
    `D` (``head_dim=64`` and ``256`` pack at the forward's 192x128 and 128x80): the
    extension's rule
    (``backward_tile_refusal``), asked once per tile and head dim. Under torch.compile or
    with a symbolic head dim the backward's plan names it instead."""
    if type(D) is not int:
        return
    key = (D, mask._meta[4], mask._meta[5])
    why = _BACKWARD_REFUSALS.get(key)
    if why is None:   # the first call of this tile and head dim (the extension is not traced)
        if _torch().compiler.is_compiling():
            return
        why = _fragmask.backward_tile_refusal(*key) or ""
        _BACKWARD_REFUSALS[key] = why
    if why:
        raise ValueError(
            f"{what}: the mask's {key[1]}x{key[2]} tile is a forward tile; the backward at "
            f"head dim {D} cannot read it ({why}). For training, build the mask with "
            f"transposed=True (head_dim= then packs at the backward's tile) or "
            f"block=(128, 128)")


# Slots of a forward plan entry (_forward_plan).
_HANDLE, _OUT_SHAPE, _LSE_SHAPE, _LSE_BYTES, _WS_BYTES, _WS_LSE_AT, _BSHD, _BWD = range(8)
_fwd_plans = {}


def _forward_plan(q, k, v, mask, causal, window, scale, bshd, device, splits):
    """The eager path's plan of a forward, found by what decides it (the tensors'
    shapes, strides, dtype and device, the mask's registry id, causal, window, scale,
    layout and splits: a tuple of ints that is cheap to hash) and made once per key by
    the extension, which checks the call then (shapes, strides, the mask's tile and fit,
    window, scale): a list of the handle, the output and lse shapes, the lse's and the
    split workspace's bytes, the layout and the backward's state (``_backward``)."""
    causal = bool(causal)
    key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, device,
           0 if mask is None else mask._meta[8], causal, window, scale, bshd, splits)
    try:
        entry = _fwd_plans.get(key)
    except TypeError:   # an unhashable window or scale: the extension names it
        entry, key = None, None
    if entry is not None:
        return entry
    mask_id, lists = (0, None) if mask is None else _mask_ptrs(mask, q, device)
    left, right = (-1, -1) if window is None else window
    views = ((0, q.shape, q.stride()), (0, k.shape, k.stride()), (0, v.shape, v.stride()))
    # The current stream: a plan first made under CUDA-graph capture uploads nothing.
    handle = _API["attention_plan"](*views, mask_id, lists, causal, left, right, scale, bshd,
                                    device, q.dtype is _f16, splits, _get_stream(device))
    n_o, n_lse = handle.workspace_floats
    qs = q.shape
    B, H, Sq, D = (qs[0], qs[2], qs[1], qs[3]) if bshd else tuple(qs)
    if bshd:
        views = tuple(_bhsd_view(x) for x in views)
    # The backward's state: the bhsd views, the launch's constants, its plans by dO's
    # strides (made at the first backward: the mask's transposed lists may be missing),
    # and the transposed lists those plans were made with (_backward_handle).
    bwd = (views, causal, int(left), int(right),
           D ** -0.5 if scale is None else float(scale), mask_id, {}, [])
    # The split workspace is one block: o's floats are a multiple of D (64 or more), so
    # the lse part stays 16-byte aligned.
    # O in the caller's layout: a bshd plan writes contiguous [B, Sq, H, D].
    entry = (handle, (B, Sq, H, D) if bshd else (B, H, Sq, D), (B, H, Sq), 4 * B * H * Sq,
             4 * (n_o + n_lse) if n_o else 0, 4 * n_o, bshd, bwd)
    # Only keys whose equality is the call's identity are cached (a float window bound
    # equals an int one but is refused by the extension).
    if (key is not None and (window is None or (type(left) is int and type(right) is int))
            and (scale is None or type(scale) is float)):
        if len(_fwd_plans) >= 256:
            _fwd_plans.clear()
        _fwd_plans[key] = entry
    return entry


_LSE_SCRATCH = {}    # device index -> (address, bytes) of its write-only lse block
_LSE_BLOCKS = []     # every such block ever made (never freed: see _lse_scratch)


def _lse_scratch(q, device, nbytes):
    """The address of a block of at least `nbytes` on q's device where forwards whose
    caller did not ask for the lse write it (the attention kernel always writes one; no
    launch reads this block). Calls on any stream share it: their writes race, but
    nothing reads them, and the block is never freed (a kernel on another stream may
    still be writing to a block outgrown since), so no allocation can land on it. Made
    or grown outside CUDA-graph capture only: 0 when that would be needed (the caller
    takes a block of torch's allocator instead)."""
    hit = _LSE_SCRATCH.get(device)
    if hit is not None and hit[1] >= nbytes:
        return hit[0]
    if _capturing():
        return 0
    size = max(nbytes, 1 << 16, 0 if hit is None else 2 * hit[1])
    block = q.new_empty((size // 4,), dtype=_f32)
    _LSE_BLOCKS.append(block)
    _LSE_SCRATCH[device] = (block.data_ptr(), size)
    return block.data_ptr()


def _forward_run(entry, q, k, v, need_lse, device):
    """One launch of a forward plan: (out, contiguous in the caller's layout: [B, Sq, H,
    D] for bshd, else [B, H, Sq, D]; lse or None). An
    lse nobody asked for goes to the device's write-only scratch block
    (:func:`_lse_scratch`); a split workspace lives in a block of torch's caching
    allocator taken and given back around the launch (stream-ordered, CUDA-graph pools
    included, as a tensor's) when the current device is q's."""
    if entry[_BSHD]:
        out = q.new_empty(entry[_OUT_SHAPE])
    else:
        out = _empty_like(q, memory_format=_contiguous)
    stream = _get_stream(device)
    lse = None
    lse_ptr = 0
    if not need_lse:
        lse_ptr = _lse_scratch(q, device, entry[_LSE_BYTES])
    blocks = []
    try:
        if not lse_ptr:
            lse = q.new_empty(entry[_LSE_SHAPE], dtype=_f32)
            lse_ptr = lse.data_ptr()
        ws_bytes = entry[_WS_BYTES]
        if not ws_bytes:
            ws_o = ws_lse = 0
        else:
            if _get_device() == device:
                ws_o = _raw_alloc(ws_bytes, stream)
                blocks.append(ws_o)
            else:
                ws = q.new_empty((ws_bytes // 4,), dtype=_f32)
                ws_o = ws.data_ptr()
            ws_lse = ws_o + entry[_WS_LSE_AT]
        entry[_HANDLE].run_ptrs(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                lse_ptr, ws_o, ws_lse, stream)
    finally:
        for p in blocks:
            _raw_delete(p)
    return out, (lse if need_lse else None)


def _bhsd_view(view):
    """A [B, S, H, D] (address, shape, strides) view as the [B, H, S, D] one."""
    p, s, st = view
    return p, (s[0], s[2], s[1], s[3]), (st[0], st[2], st[1], st[3])


def _grads_like(torch, q, k, v):
    """Empty dQ, dK, dV shaped like q, k, v (the op's [B, H(kv), S, D] views, or a bshd
    caller's tensors): q's and k's memory order where they are dense (``empty_like``), dV in
    dK's strides (the kernels write both in one)."""
    dq, dk = torch.empty_like(q), torch.empty_like(k)
    return dq, dk, torch.empty_strided(v.shape, dk.stride(), dtype=v.dtype, device=v.device)


def _grad_strides(dq, dk):
    """The gradients' element strides [batch, head, row] of [B, H, S, D] tensors dq and dk
    (dv shares dk's), as the backward plans them."""
    return tuple(dq.stride()[:3]), tuple(dk.stride()[:3])


def _backward_handle(entry, mask, q, out, grad_out, device, grad_strides=None,
                     deterministic=False):
    """The backward plan of a forward plan's call for dO's and the gradients' strides and
    the backward's mode (made once per entry, strides and mode; the mask's transposed
    lists are resolved here the first time). ``grad_strides``: :func:`_grad_strides`, or
    None for contiguous gradients; ``deterministic``: the plan orders its dQ reductions."""
    views, causal, left, right, scale, mask_id, handles, kept = entry[_BWD]
    key = (grad_out.stride(), grad_strides, deterministic)
    handle = handles.get(key)
    if handle is not None:
        return handle
    lists = tlists = tl = None
    bwd_id = 0
    if mask is not None:
        _, lists = _mask_ptrs(mask, q, device)
        tl, bwd_id = _device_transposed(_T, mask, q.device)
        tlists = tuple(t.data_ptr() for t in tl)
    handle = _API["attention_backward_plan"](
        *views, (0, out.shape, out.stride()), (0, grad_out.shape, grad_out.stride()), bwd_id,
        lists, tlists, causal, left, right, scale, _get_stream(device), device,
        q.dtype is _f16, grad_strides, deterministic)
    if len(handles) >= 16:
        handles.clear()
        kept.clear()
    handles[key] = handle
    # The handle holds these transposed lists' addresses, and every Mask whose forward
    # plan this entry is (a mask and its with_transposed() copy share a GPU pack's forward
    # lists, so their plan key) runs it: the entry keeps the lists alive, so a mask
    # collected first cannot leave its addresses dangling (the lists are the same mask's).
    if tl is not None and all(x is not tl for x in kept):
        kept.append(tl)
    return handle


def _forget_backward_plans(mask_id):
    """Drops the eager path's backward plans of the forward plans of mask `mask_id`
    (``Mask.to("cpu")`` read transposed lists back: the next backward plans with them).
    The plans themselves live on in the extension's cache while a captured graph may
    use them."""
    for key, entry in list(_fwd_plans.items()):
        if key[8] == mask_id:
            entry[_BWD][6].clear()


_grad = None
_attention_apply = None
_deterministic_enabled = None


def _init_autograd(torch):
    """The eager autograd path: a ``torch.autograd.Function`` whose forward and backward
    run the extension's plans directly (no custom-op dispatch). The forward gets its
    plan entry from the wrapper; the backward finds its plan in that entry."""
    global _grad, _attention_apply, _deterministic_enabled
    _grad = torch._C.is_grad_enabled
    # torch's flag as the C getter that are_deterministic_algorithms_enabled returns
    # (read on the eager path only: nothing traces it there).
    _deterministic_enabled = getattr(torch._C, "_get_deterministic_algorithms",
                                     torch.are_deterministic_algorithms_enabled)

    class AttentionFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, entry, mask, want_lse, deterministic):
            device = q.get_device()
            out, lse = _forward_run(entry, q, k, v, True, device)
            # lse is saved as an intermediate when it is not an output (no double
            # backward: the backward is not differentiable). The saved tensors keep
            # their addresses alive; ctx.saved_tensors checks that none was modified.
            # O is saved as returned: a saved view of an output is a reference cycle (the graph,
            # the view, its base, the graph) that kept every output whose graph was dropped
            # (bench/results/session-2026-11-28f/bshd-out/). The backward views a bshd O as
            # [B, H, Sq, D].
            ctx.save_for_backward(q, k, v, out, lse)
            ctx.fm = (entry, mask, device, deterministic)
            if want_lse:
                ctx.mark_non_differentiable(lse)
                return out, lse
            return out

        @staticmethod
        def backward(ctx, grad_out, grad_lse=None):
            q, k, v, out, lse = ctx.saved_tensors
            entry, mask, device, deterministic = ctx.fm
            if entry[_BSHD]:
                out = out.transpose(1, 2)
            if grad_out is None:      # only lse was used: it is not differentiable
                grad_out = torch.zeros_like(out)
            elif entry[_BSHD]:
                grad_out = grad_out.transpose(1, 2)
            if not _dout_as_is(grad_out):
                grad_out = grad_out.contiguous()
            strides = None
            if entry[_BSHD]:
                # dQ, dK, dV in the caller's [B, S, H, D] layout (q's and k's own strides where
                # dense), written there by the kernels: contiguous gradients for contiguous
                # inputs, no transposes (docs/backward.md, "Gradients in the caller's layout").
                dq, dk, dv = _grads_like(torch, q, k, v)
                strides = _grad_strides(dq.transpose(1, 2), dk.transpose(1, 2))
            elif q.is_contiguous() and k.is_contiguous() and v.is_contiguous():
                # preserve_format keeps a contiguous tensor's strides: about 0.2 us less
                # per allocation than asking for contiguous_format.
                dq, dk, dv = _empty_like(q), _empty_like(k), _empty_like(v)
            else:
                dq = _empty_like(q, memory_format=_contiguous)
                dk = _empty_like(k, memory_format=_contiguous)
                dv = _empty_like(v, memory_format=_contiguous)
            # The plan of dO's and the gradients' strides and the backward's mode, made at
            # the first backward of each.
            handle = entry[_BWD][6].get((grad_out.stride(), strides, deterministic))
            if handle is None:
                handle = _backward_handle(entry, mask, q, out, grad_out, device, strides,
                                          deterministic)
            handle.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                       lse.data_ptr(), grad_out.data_ptr(), dq.data_ptr(), dk.data_ptr(),
                       dv.data_ptr(), _get_stream(device))
            return dq, dk, dv, None, None, None, None

    # torch's C apply (THPFunction_apply) without torch.autograd.Function.apply's Python
    # wrapper where a torch has one: that wrapper only unwraps functorch levels, and
    # this path runs only with no functorch transform active (``_untraced``).
    try:
        _attention_apply = super(torch.autograd.Function, AttentionFunction).apply
    except AttributeError:
        _attention_apply = AttentionFunction.apply


def _attention_op_path(q, k, v, mask, causal, window, scale, return_lse, layout,
                       splits=None, deterministic=None):
    """``attention`` through the registered op, with every argument checked here."""
    torch = _torch()
    what = "fragmask.attention"
    if not (deterministic is None or deterministic is True or deterministic is False):
        _deterministic(torch, what, deterministic)      # names the bad value
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
    tlists = (None,) * 6
    meta = []
    if mask is not None:
        if not isinstance(mask, Mask):
            raise TypeError(f"{what}: mask must be a fragmask.Mask, not {type(mask).__name__}")
        mB, mH, mSq, mSk = mask._meta[:4]
        # Element by element: under torch.compile with dynamic shapes B, H, Sq and Sk are
        # SymInts, which tuple comparison and `in` do not trace.
        if mSq != Sq or mSk != Sk or (mB != 1 and mB != B) or (mH != 1 and mH != H):
            raise ValueError(f"{what}: the mask was built for {mask._meta[:4]} (B, H, Sq, Sk), "
                             f"the inputs are B={B}, H={H}, Sq={Sq}, Sk={Sk}")
        lists = _device_lists(torch, mask, q.device)
        meta = list(mask._meta)
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            _check_backward_tile(what, mask, D)
            # The backward reads the transposed lists: added on the GPU when missing.
            tlists, bwd_id = _device_transposed(torch, mask, q.device)
            meta.append(bwd_id)
    splits = 0 if splits is None else _count_arg(what, "splits", splits, 1, 128)
    # The backward's mode, decided now (torch's flag when not given) and carried by the
    # op's inputs to its autograd formula; without a backward it is not read.
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    deterministic = _deterministic(torch, what, deterministic) if grad else bool(deterministic)
    attention_op, _ = _register()
    out, lse = attention_op(q, k, v, *lists, *tlists, meta, bool(causal), window, scale,
                            splits, deterministic)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return (out, lse) if return_lse else out


_lightning_plans = {}


def lightning_decode(q, k, v, kv, slope, *, out=None):
    """Lightning-attention decode step (write-up 003): ``kv ← exp(−slope)·kv + kᵀv;
    o = q·kv`` for n tokens in order. q, k: [B, H, n, D], v: [B, H, n, E] (bf16, fp16
    or fp32); kv: fp32 [B, H, D, E], updated in place; slope: fp32 [H]. Returns o
    [B, H, n, E]; with ``out`` (a contiguous tensor of v's shape, dtype and device) o is
    written there and ``out`` returned, so a decode loop allocates nothing per step."""
    torch = _T if _T is not None else _torch()
    if _function_mode_on() and _default_device_only():
        with _no_torch_function():
            return lightning_decode(q, k, v, kv, slope, out=out)
    # Eager fast path: plain contiguous CUDA tensors of one device, nothing tracing the
    # call: the op's body without the dispatcher (the plan checked dtypes, shapes and
    # ranks once per key; a run checks that out overlaps no input, from the addresses
    # and the plan's sizes). An ``out`` of another shape, dtype or device, or one that
    # needs grad or is not contiguous, takes the checked path, which names the problem.
    if (_FAST and _plain is not None and type(q) is _Tensor and type(k) is _Tensor
            and type(v) is _Tensor and type(kv) is _Tensor and type(slope) is _Tensor
            and _plain(q, k, v) and not kv.requires_grad):
        device = q.get_device()
        vs = v.shape
        if (device >= 0 and k.get_device() == device and v.get_device() == device
                and kv.get_device() == device and slope.get_device() == device
                and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
                and kv.is_contiguous() and slope.is_contiguous()
                and (out is None or (type(out) is _Tensor and out.dtype is v.dtype
                                     and not out.requires_grad and out.get_device() == device
                                     and out.is_contiguous() and out.shape == vs))):
            # A contiguous v's strides (preserve_format): a contiguous out.
            if out is None:
                out = _empty_like(v)
            key = (q.shape, k.shape, vs, kv.shape, slope.shape, q.dtype, k.dtype, v.dtype,
                   kv.dtype, slope.dtype, device)
            plan = _lightning_plans.get(key)
            if plan is None:     # checked once per shapes and dtypes, then addresses only
                plan = _API["lightning_plan"](_raw(q), _raw(k), _raw(v), _raw(kv), _raw(slope),
                                              _raw(out), device)
                if len(_lightning_plans) >= 256:
                    _lightning_plans.clear()
                _lightning_plans[key] = plan
            plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), kv.data_ptr(),
                     slope.data_ptr(), _get_stream(device))
            return out
    what = "fragmask.lightning_decode"
    _check_tensors(torch, what, [("q", q), ("k", k), ("v", v)],
                   ("bfloat16", "float16", "float32"))
    _check_tensors(torch, what, [("kv", kv), ("slope", slope)], ("float32",))
    if kv.device != q.device:
        raise ValueError(f"{what}: kv is on {kv.device} but q on {q.device}")
    if not kv.is_contiguous():
        raise ValueError(f"{what}: kv is updated in place and must be contiguous")
    if out is not None:
        _check_out(torch, what, out, v, (q, k, kv))
    q, k, v = (t.contiguous() for t in (q, k, v))
    _, lightning_op = _register()
    o = lightning_op(q, k, v, kv, slope.reshape(-1).contiguous())
    if out is None:
        return o
    out.copy_(o)
    return out


def _span(t):
    """[first, last) byte addresses of a tensor's storage extent."""
    lo = hi = t.data_ptr()
    size = t.element_size()
    for n, st in zip(t.shape, t.stride()):
        if n == 0:
            return lo, lo
        if st > 0:
            hi += (n - 1) * st * size
        else:
            lo += (n - 1) * st * size
    return lo, hi + size


def _overlaps(out, tensors, span=_span):
    """Whether ``out``'s storage extent meets any of ``tensors``'."""
    lo, hi = span(out)
    for t in tensors:
        a, b = span(t)
        if a < hi and lo < b:
            return True
    return False


def _check_out(torch, what, out, like, inputs=()):
    """An ``out=`` tensor: a contiguous torch.Tensor of ``like``'s shape, dtype and device
    (PyTorch's out= convention, without resizing), sharing no memory with the inputs."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{what}: out must be a torch.Tensor, not {type(out).__name__}")
    if out.shape != like.shape or out.dtype != like.dtype or out.device != like.device:
        raise ValueError(f"{what}: out is {tuple(out.shape)} {out.dtype} on {out.device}; "
                         f"expected {tuple(like.shape)} {like.dtype} on {like.device}")
    if not out.is_contiguous():
        raise ValueError(f"{what}: out must be contiguous")
    if out.requires_grad:
        raise ValueError(f"{what}: out must not require grad")
    if _overlaps(out, (like,) + tuple(inputs)):
        raise ValueError(f"{what}: out overlaps an input (the kernel reads the inputs "
                         "while it writes out)")


def warmup(device=None, *, head_dims=(64, 128, 256), lightning=((96, 96, "bf16"),),
           packer_tiles=()):
    """Compiles and loads the kernels ahead of time (NVRTC, cached on disk), so that no
    later call compiles: call it before capturing a CUDA graph. ``lightning`` lists
    (D, E, dtype) of the lightning decode kernels to prepare, ``packer_tiles`` the
    blocks (``(block_m, block_n)``, warpgroups as ``Mask`` picks them, or
    ``(block_m, block_n, warpgroups)``) of the GPU packer behind
    ``Mask.from_dense``."""
    torch = _torch()
    from ._mask import _tile

    index = torch.cuda.current_device() if device is None else torch.device(device).index
    tiles = []
    for t in packer_tiles:
        t = tuple(t)
        bm, bn, wg, swap, _, _ = _tile(t[:2], t[2] if len(t) > 2 else None, False,
                                       "fragment-native", 0)
        tiles.append((bm, bn, wg, swap))
    _fragmask.warmup(index if index is not None else torch.cuda.current_device(),
                     list(head_dims), [(int(d), int(e), str(t)) for d, e, t in lightning],
                     tiles)


def _register_decode():
    """Defines ``fragmask::decode`` once (on first use)."""
    global _decode_op
    if _decode_op is not None:
        return _decode_op
    torch = _torch()
    from typing import List, Optional, Tuple

    Tensor = torch.Tensor

    @torch.library.custom_op("fragmask::decode", mutates_args=())
    def decode_op(q: Tensor, k: Tensor, v: Tensor, block_table: Optional[Tensor],
                  seqlens_k: Optional[Tensor], cu_seqlens_q: Optional[Tensor],
                  max_seqlen_q: int, window: List[int], scale: float,
                  splits: int, mask_list: Optional[Tensor], mask_count: Optional[Tensor],
                  mask_bits: Optional[Tensor], mask_id: int) -> Tuple[Tensor, Tensor]:
        mask = None if mask_list is None else (mask_list.data_ptr(), mask_count.data_ptr(),
                                               mask_bits.data_ptr())
        return _decode_run(torch, q, k, v, block_table, seqlens_k, cu_seqlens_q,
                           max_seqlen_q, window[0], window[1], scale, splits, mask, mask_id)

    @decode_op.register_fake
    def _(q, k, v, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, window, scale, splits,
          mask_list, mask_count, mask_bits, mask_id):
        _, _, _, lse_shape = _decode_plan(q, k, v, block_table, seqlens_k, cu_seqlens_q,
                                          max_seqlen_q, window[0], window[1], scale, splits,
                                          132, mask_id)
        return (q.new_empty(q.shape), q.new_empty(lse_shape, dtype=torch.float32))

    _decode_op = decode_op
    return decode_op


def _decode_plan(q, k, v, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, left, right,
                 scale, splits, multiprocessors, mask_id):
    """(splits, workspace o floats, workspace lse floats, lse shape): the host's checks and
    plan, from shapes only (no GPU)."""
    shape = lambda t: None if t is None else list(t.shape)  # noqa: E731
    return _fragmask.decode_plan(
        list(q.shape), list(k.shape), list(v.shape),
        tuple(str(t.dtype).replace("torch.", "") for t in (q, k, v)),
        shape(block_table), shape(seqlens_k), shape(cu_seqlens_q), max_seqlen_q,
        left, right, scale, splits, multiprocessors, mask_id)


_decode_plans = {}
_decode_plain = {}   # decode's eager calls without tables, lengths or mask: a shorter key


def _decode_handle(q, k, v, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, left, right,
                   scale, splits, mask_id, device):
    """:func:`_decode_hit` of a call's tensors."""
    return _decode_hit(device, q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype,
                       None if block_table is None else block_table.shape,
                       None if seqlens_k is None else seqlens_k.shape,
                       None if cu_seqlens_q is None else cu_seqlens_q.shape, max_seqlen_q,
                       left, right, scale, splits, mask_id)


def _decode_hit(device, qs, ks, vs, q_dtype, k_dtype, v_dtype, table, lengths, offsets,
                max_seqlen_q, left, right, scale, splits, mask_id, head_major=False):
    """(the extension's plan of a decode call, lse shape, workspace floats, lse bytes,
    the workspace's lse offset in floats), made once per distinct call from shapes and
    dtypes (every check, the split count from the SM count, the kernel) and cached.
    ``head_major``: the caches are [B, Hkv, Sk, D] (the attention entry point's)."""
    key = (device, qs, ks, vs, q_dtype, k_dtype, v_dtype, table, lengths, offsets,
           max_seqlen_q, left, right, scale, splits, mask_id, head_major)
    hit = _decode_plans.get(key)
    if hit is None:
        dims = lambda t: None if t is None else list(t)  # noqa: E731
        handle = _API["decode_plan"](
            list(qs), list(ks), list(vs),
            (_dtype_name(q_dtype), _dtype_name(k_dtype), _dtype_name(v_dtype)),
            dims(table), dims(lengths), dims(offsets), max_seqlen_q, left, right,
            scale, splits, device, mask_id, head_major)
        lse_shape = tuple(handle.lse_shape)
        lse_bytes = 4
        for n in lse_shape:
            lse_bytes *= n
        ws_o, _ = handle.workspace_floats
        # The workspace is one block: o's floats rounded up to 64 (256 bytes) before lse's.
        hit = (handle, lse_shape, handle.workspace_floats, lse_bytes, -(-ws_o // 64) * 64)
        if len(_decode_plans) >= 256:
            _decode_plans.clear()
        _decode_plans[key] = hit
    return hit


def _decode_launch_planned(hit, q, k, v, block_table, seqlens_k, cu_seqlens_q, mask, device,
                           need_lse=True, workspace=None):
    """Allocates out (and lse when asked for: the kernels write none at a null address)
    and runs a planned decode; a workspace not given lives in a block of torch's caching
    allocator taken and given back around the launch (stream-ordered, as the attention
    forward's)."""
    handle, lse_shape, (ws_o, ws_lse), lse_bytes, ws_lse_at = hit
    out = _empty_like(q)   # q is contiguous (every caller checks): so is out
    out_ptr = out.data_ptr()
    stream = _get_stream(device)
    lse = None
    lse_ptr = 0
    if need_lse:
        lse = q.new_empty(lse_shape, dtype=_f32)
        lse_ptr = lse.data_ptr()
    block = None
    if not ws_o:
        # One split, or splits merged in a cluster: the kernel never touches the
        # workspace (docs/decode.md); out's address stands in for it.
        wo_ptr = wl_ptr = out_ptr
    elif workspace is not None:
        wo_ptr, wl_ptr = workspace
    elif _get_device() == device:
        wo_ptr = block = _raw_alloc(4 * (ws_lse_at + ws_lse), stream)
        wl_ptr = wo_ptr + 4 * ws_lse_at
    else:
        ws = q.new_empty((ws_lse_at + ws_lse,), dtype=_f32)
        wo_ptr = ws.data_ptr()
        wl_ptr = wo_ptr + 4 * ws_lse_at
    try:
        handle.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out_ptr, lse_ptr, wo_ptr, wl_ptr,
                   0 if block_table is None else block_table.data_ptr(),
                   0 if seqlens_k is None else seqlens_k.data_ptr(),
                   0 if cu_seqlens_q is None else cu_seqlens_q.data_ptr(),
                   _NO_MASK if mask is None else mask, stream)
    finally:
        if block is not None:
            _raw_delete(block)
    return out, lse


_NO_MASK = (0, 0, 0)
_STREAM_BLOCKS = {}   # (device, raw stream) -> (address, bytes) of its decode workspace
# False: every eager decode takes a block of torch's allocator per call (the bench
# compares both).
_KEEP_STREAM_BLOCKS = True


def _stream_block(device, stream, nbytes):
    """The address of a block of at least `nbytes` on `device` that eager decode calls
    on `stream` use as their split workspace, kept between calls (the calls of one
    stream are ordered, as the blocks of torch's caching allocator are reused on the
    stream that freed them), or 0 where a block per call is needed: inside CUDA-graph
    capture (a graph's workspace is its own pool's) or when the current device is not
    `device`. A larger call replaces the block (given back to torch's allocator on its
    stream: stream-ordered, as a tensor's)."""
    if _capturing() or not _KEEP_STREAM_BLOCKS:
        return 0
    key = (device, stream)
    hit = _STREAM_BLOCKS.get(key)
    if hit is not None and hit[1] >= nbytes:
        return hit[0]
    if _get_device() != device:
        return 0
    if hit is not None:
        del _STREAM_BLOCKS[key]
        _raw_delete(hit[0])
    elif len(_STREAM_BLOCKS) >= 64:     # streams come and go: keep the recent ones
        for ptr, _ in _STREAM_BLOCKS.values():
            _raw_delete(ptr)
        _STREAM_BLOCKS.clear()
    ptr = _raw_alloc(nbytes, stream)
    _STREAM_BLOCKS[key] = (ptr, nbytes)
    return ptr


def _decode_plain_launch(hit, q, k, v, device, need_lse):
    """:func:`_decode_launch_planned` of a call without tables, lengths or mask, its
    split workspace the stream's kept block (:func:`_stream_block`) outside capture."""
    handle, lse_shape, (ws_o, ws_lse), _, ws_lse_at = hit
    out = _empty_like(q)   # q is contiguous (checked): so is out
    out_ptr = out.data_ptr()
    stream = _get_stream(device)
    if ws_o:
        wo_ptr = _stream_block(device, stream, 4 * (ws_lse_at + ws_lse))
        if not wo_ptr:
            return _decode_launch_planned(hit, q, k, v, None, None, None, None, device,
                                          need_lse)
        wl_ptr = wo_ptr + 4 * ws_lse_at
    else:   # the kernel never touches the workspace (see _decode_launch_planned)
        wo_ptr = wl_ptr = out_ptr
    lse = None
    lse_ptr = 0
    if need_lse:
        lse = q.new_empty(lse_shape, dtype=_f32)
        lse_ptr = lse.data_ptr()
    handle.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out_ptr, lse_ptr, wo_ptr, wl_ptr, 0,
               0, 0, _NO_MASK, stream)
    return out, lse


def _decode_run(torch, q, k, v, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, left,
                right, scale, splits, mask, mask_id, need_lse=True):
    """One decode call: the cached plan, outputs and workspace from torch's allocator,
    the launch on torch's current stream. The op's body, and the eager fast path's (no
    dispatch). ``mask``: the device addresses of the mask's decode arrays, or None."""
    q = q.contiguous()   # the kernel reads q, and writes o, contiguous (a no-op in decode())
    device = q.get_device()
    hit = _decode_handle(q, k, v, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, left,
                         right, scale, splits, mask_id, device)
    return _decode_launch_planned(hit, q, k, v, block_table, seqlens_k, cu_seqlens_q,
                                  mask, device, need_lse)


def _decode_mask_arrays(torch, mask, device):
    """The Mask in decode's form on `device`: int32 tensors of the (key block, partial)
    list pairs, the counts and the partial blocks' row-major bits (docs/decode.md,
    "Masks"), converted once per Mask and copied once per device (cached on the Mask)."""
    device = torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = ("decode", index)
    arrays = mask._device_cache.get(key)
    if arrays is None:
        if torch.compiler.is_compiling():
            raise RuntimeError("fragmask.decode: call fragmask.decode with this mask once "
                               "eagerly before torch.compile traces code that uses it")
        host = mask._device_cache.get(("decode", "host"))
        if host is None:
            data = mask.to_bytes()   # reads a GPU pack back first: its registry id is final
            mask_id = mask._meta[8]
            host = _fragmask.decode_mask_prepare(mask_id, data)
            mask._device_cache[("decode", "host")] = host
            weakref.finalize(mask, _fragmask.decode_mask_release, mask_id)
        arrays = tuple(torch.frombuffer(bytearray(b), dtype=torch.int32).to(device)
                       for b in host)
        mask._device_cache[key] = arrays
    return arrays


def decode(q, k_cache, v_cache, *, block_table=None, seqlens_k=None, cu_seqlens_q=None,
           max_seqlen_q=None, causal=False, window=None, scale=None, splits=None,
           return_lse=False, mask=None, topk_indices=None):
    """Split-KV decode over a KV cache (issue 11; docs/decode.md).

    q: ``[B, Sq, H, D]``, or ``[total_q, H, D]`` with ``cu_seqlens_q`` (int32 ``[B + 1]``,
    mixed batches) and ``max_seqlen_q`` (the most tokens a request may have: the grid is
    sized for it, so a CUDA graph captured once replays at any lengths up to it).
    k_cache, v_cache: contiguous ``[B, Sk, Hkv, D]``, or pages ``[num_pages, page_size,
    Hkv, D]`` with ``block_table`` (int32 ``[B, max_pages]``). ``seqlens_k``: int32
    ``[B]`` keys per request (default: all). bf16 or fp16, D = 64, 128 or 256, H a
    multiple of Hkv. ``causal`` is bottom-right aligned; ``window = (left, right)`` a
    sliding window (-1: unlimited). Returns o like q (and lse, float32 ``[B, H, Sq]`` or
    ``[H, total_q]``, natural log, with ``return_lse``). A row with no visible key gives
    o = 0 and lse = -inf. Device-resident tables and lengths are clamped by the kernel,
    not read on the host (no synchronisation).

    ``mask``: a ``fragmask.Mask`` of (1 or B, 1 or H, Sq, Sk) whose rows are the Sq new
    tokens and columns the keys (``fragmask decode --mask``): only its listed key blocks
    are read; causal and window apply on top. Converted once per Mask (cached on it).
    ``topk_indices``: int32 ``[B, k]`` key indices per request (``fragmask decode
    --topk``): only those keys of a contiguous cache are read, by every token of the
    request; each index must lie in ``0..Sk`` (device-resident: not checked on the host;
    an index out of range reads a clamped key, never out of bounds); no causal, window,
    ``seqlens_k``, ``block_table`` or mask with it."""
    torch = _T if _T is not None else _torch()
    if _function_mode_on() and _default_device_only():
        with _no_torch_function():
            return decode(q, k_cache, v_cache, block_table=block_table, seqlens_k=seqlens_k,
                          cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max_seqlen_q, causal=causal,
                          window=window, scale=scale, splits=splits, return_lse=return_lse,
                          mask=mask, topk_indices=topk_indices)
    what = "fragmask.decode"
    if splits is not None:
        splits = _count_arg(what, "splits", splits, 1)
    if max_seqlen_q is not None:
        max_seqlen_q = _count_arg(what, "max_seqlen_q", max_seqlen_q, 1)
    if topk_indices is not None:
        q, k_cache, v_cache, block_table, seqlens_k = _topk_gather(
            torch, what, q, k_cache, v_cache, topk_indices, block_table, seqlens_k, mask,
            causal, window)
    left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    if causal:
        right = 0
    # Eager fast path: plain CUDA tensors of one device, nothing tracing or transforming
    # the call: run the op's body without the dispatcher (the extension checks shapes,
    # dtypes, contiguity and the plan before it launches).
    if (_FAST and _plain is not None and type(q) is _Tensor and type(k_cache) is _Tensor
            and type(v_cache) is _Tensor and (mask is None or type(mask) is Mask)
            and _plain(q, k_cache, v_cache)):
        device = q.get_device()
        if (device >= 0 and k_cache.get_device() == device and v_cache.get_device() == device
                and (cu_seqlens_q is None) == (max_seqlen_q is None)
                and q.is_contiguous() and k_cache.is_contiguous()
                and v_cache.is_contiguous()
                and ((block_table is None and seqlens_k is None and cu_seqlens_q is None)
                     or all(t is None or (type(t) is _Tensor and t.get_device() == device
                                          and t.dtype is _i32 and t.is_contiguous())
                            for t in (block_table, seqlens_k, cu_seqlens_q)))):
            if (mask is None and block_table is None and seqlens_k is None
                    and cu_seqlens_q is None):
                # The common call: its plan by a short key (no tables, lengths or mask).
                key = (q.shape, k_cache.shape, v_cache.shape, q.dtype, k_cache.dtype,
                       v_cache.dtype, device, left, right, scale, splits)
                try:
                    hit = _decode_plain.get(key)
                except TypeError:   # an unhashable scale: the plan below names it
                    hit = key = None
                if hit is None:
                    hit = _decode_hit(device, q.shape, k_cache.shape, v_cache.shape, q.dtype,
                                      k_cache.dtype, v_cache.dtype, None, None, None, 0,
                                      left, right, 0.0 if scale is None else float(scale),
                                      0 if splits is None else splits, 0)
                    if key is not None and (scale is None or type(scale) is float):
                        if len(_decode_plain) >= 256:
                            _decode_plain.clear()
                        _decode_plain[key] = hit
                out, lse = _decode_plain_launch(hit, q, k_cache, v_cache, device, return_lse)
                return (out, lse) if return_lse else out
            ptrs, mask_id = None, 0
            if mask is not None:
                ptrs = tuple(t.data_ptr() for t in _decode_mask_arrays(torch, mask, q.device))
                mask_id = mask._meta[8]
            hit = _decode_hit(device, q.shape, k_cache.shape, v_cache.shape, q.dtype,
                              k_cache.dtype, v_cache.dtype,
                              None if block_table is None else block_table.shape,
                              None if seqlens_k is None else seqlens_k.shape,
                              None if cu_seqlens_q is None else cu_seqlens_q.shape,
                              max_seqlen_q or 0, left, right,
                              0.0 if scale is None else float(scale),
                              0 if splits is None else splits, mask_id)
            out, lse = _decode_launch_planned(hit, q, k_cache, v_cache, block_table, seqlens_k,
                                              cu_seqlens_q, ptrs, device, return_lse)
            return (out, lse) if return_lse else out
    _check_tensors(torch, what, [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)],
                   _DTYPES)
    ints = [(n, t) for n, t in (("block_table", block_table), ("seqlens_k", seqlens_k),
                                ("cu_seqlens_q", cu_seqlens_q)) if t is not None]
    if ints:
        _check_tensors(torch, what, [("q", q)] + ints, _DTYPES + ("int32",))
        for n, t in ints:
            if t.dtype != torch.int32:
                raise TypeError(f"{what}: {n} has dtype {t.dtype}; expected int32")
    for n, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not t.is_contiguous():
            raise ValueError(f"{what}: {n} must be contiguous (a cache is never copied)")
    if cu_seqlens_q is None:
        max_seqlen_q = 0
    elif max_seqlen_q is None:
        raise ValueError(f"{what}: max_seqlen_q is required with cu_seqlens_q")
    splits = 0 if splits is None else int(splits)
    scale = 0.0 if scale is None else float(scale)
    if scale < 0 or scale != scale:
        raise ValueError(f"{what}: scale {scale} must be positive")
    mask_arrays, mask_id = (None, None, None), 0
    if mask is not None:
        if not isinstance(mask, Mask):
            raise TypeError(f"{what}: mask must be a fragmask.Mask, not {type(mask).__name__}")
        mask_arrays, mask_id = _decode_mask_arrays(torch, mask, q.device), mask._meta[8]
    q = q.contiguous()
    ints = [None if t is None else t.contiguous()
            for t in (block_table, seqlens_k, cu_seqlens_q)]
    op = _register_decode()
    out, lse = op(q, k_cache, v_cache, *ints, int(max_seqlen_q), [left, right], scale, splits,
                  *mask_arrays, int(mask_id))
    return (out, lse) if return_lse else out


def _topk_gather(torch, what, q, k_cache, v_cache, idx, block_table, seqlens_k, mask, causal,
                 window):
    """Top-k decode as the paged kernel with pages of one key (docs/decode.md, "Top-k"):
    the contiguous cache ``[B, Sk, Hkv, D]`` viewed as ``B·Sk`` pages, request b's block
    table row ``b·Sk + idx[b]`` (int32, built on the device)."""
    if block_table is not None or seqlens_k is not None or mask is not None:
        raise ValueError(f"{what}: topk_indices gathers from a contiguous cache: no "
                         "block_table, seqlens_k or mask with it")
    if causal or window is not None:
        raise ValueError(f"{what}: causal or window bounds do not apply to gathered keys")
    _check_tensors(torch, what, [("k_cache", k_cache), ("topk_indices", idx)],
                   _DTYPES + ("int32",))
    if idx.dtype != torch.int32 or idx.dim() != 2:
        raise TypeError(f"{what}: topk_indices must be int32 [B, k], not {idx.dtype} "
                        f"{tuple(idx.shape)}")
    if k_cache.dim() != 4 or not k_cache.is_contiguous() or not v_cache.is_contiguous():
        raise ValueError(f"{what}: topk_indices needs contiguous caches [B, Sk, Hkv, D]")
    B, Sk, Hkv, D = k_cache.shape
    if idx.shape[0] != B or not 1 <= idx.shape[1] <= Sk:
        raise ValueError(f"{what}: topk_indices is {tuple(idx.shape)}; expected [{B}, k] "
                         f"with 1 <= k <= {Sk}")
    if B * Sk > 2**31 - 1:
        raise ValueError(f"{what}: B x Sk = {B * Sk} keys exceed the int32 block table")
    base = torch.arange(B, dtype=torch.int32, device=idx.device) * Sk
    table = (base[:, None] + idx).contiguous()
    pages = (B * Sk, 1, Hkv, D)
    return q, k_cache.view(pages), v_cache.view(pages), table, None


def _spec(t, name, what):
    """(shape, strides, dtype, device index) of a template tensor."""
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what}: {name} must be a torch.Tensor, not {type(t).__name__}")
    if t.device.type != "cuda":
        raise ValueError(f"{what}: {name} is on {t.device}; fragmask's kernels need CUDA "
                         "tensors")
    return tuple(t.shape), tuple(t.stride()), t.dtype, t.get_device()


class AttentionPlan:
    """An attention forward planned once and run many times (FlashInfer's wrappers'
    style): every check, the kernel, the split-KV count, the workspace, the TMA
    descriptors and the parameter block are made here; ``run`` only checks that its
    tensors are the plan's (shapes, strides, dtype, device), allocates the output,
    patches the addresses and launches. Layers with the same shapes and mask share one
    plan; a run is CUDA-graph capturable (no host synchronisation, no allocation but
    the output's from torch's allocator).

    ``q``, ``k``, ``v``: tensors with the shapes, strides, dtype and device of the runs
    (only their metadata is read). The other arguments are ``attention``'s. Forward
    only (no autograd through ``run``)."""

    def __init__(self, q, k, v, mask=None, *, causal=False, window=None, scale=None,
                 layout="bhsd", splits=None):
        torch = _torch()
        what = "fragmask.AttentionPlan"
        specs = [_spec(t, n, what) for n, t in (("q", q), ("k", k), ("v", v))]
        dtype, device = specs[0][2], specs[0][3]
        if dtype not in (torch.bfloat16, torch.float16):
            raise TypeError(f"{what}: q has dtype {dtype}; expected bfloat16 or float16")
        for name, spec in zip(("k", "v"), specs[1:]):
            if spec[2] != dtype or spec[3] != device:
                raise ValueError(f"{what}: {name} is {spec[2]} on cuda:{spec[3]}, q {dtype} "
                                 f"on cuda:{device}")
        for name, spec in zip(("q", "k", "v"), specs):
            if len(spec[0]) != 4:
                raise ValueError(f"{what}: {name} has rank {len(spec[0])}; expected 4")
        if layout not in ("bhsd", "bshd"):
            raise ValueError(f"{what}: layout must be 'bhsd' or 'bshd', not {layout!r}")
        if splits is not None:
            _count_arg(what, "splits", splits, 1, 128)
        if mask is not None and not isinstance(mask, Mask):
            raise TypeError(f"{what}: mask must be a fragmask.Mask, not {type(mask).__name__}")
        left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
        if scale is not None:
            scale = float(scale)
        self._decode = None
        qs = specs[0][0]
        if (splits is None and mask is None and not causal and window is None
                and qs[1 if layout == "bshd" else 2] == 1
                and (scale is None or 0 < scale < float("inf"))):
            shapes = _decode_shapes(q, k, v, layout == "bshd")
            if shapes is not None:      # a decode shape: the decode kernel's plan
                try:
                    self._decode = _decode_hit(device, shapes[0], shapes[1], shapes[1],
                                               dtype, dtype, dtype, None, None, None, 0, -1,
                                               -1, 0.0 if scale is None else scale, 0, 0,
                                               shapes[3])
                    self._decode_lse = shapes[2]
                except ValueError:
                    self._decode = None
        if self._decode is not None:
            self._specs = tuple(s[:2] for s in specs)
            self._dtype, self._device, self._bshd = dtype, device, layout == "bshd"
            handle, _, (ws_o, ws_lse), _, ws_lse_at = self._decode
            self.splits = handle.splits
            self.kernel = None
            self.largest_first = False
            self._workspace = self._ws_ptrs = None
            if ws_o:
                self._workspace = torch.empty(ws_lse_at + ws_lse, dtype=_f32, device=q.device)
                ptr = self._workspace.data_ptr()
                self._ws_ptrs = (ptr, ptr + 4 * ws_lse_at)
            return
        mask_id, lists = (0, None) if mask is None else _mask_ptrs(mask, q, device)
        self._mask = mask          # keeps its device lists alive
        self._specs = tuple(s[:2] for s in specs)
        self._dtype, self._device = dtype, device
        self._bshd = layout == "bshd"
        self._handle = _API["attention_plan"](
            (0,) + specs[0][:2], (0,) + specs[1][:2], (0,) + specs[2][:2], mask_id, lists,
            bool(causal), left, right, scale, self._bshd, device, dtype is torch.float16,
            0 if splits is None else splits, _raw_stream(torch)(device))
        n_o, n_lse = self._handle.workspace_floats
        self.splits = self._handle.splits
        # The split tail, (tiles, splits) or None: the launch's last work tiles cut into
        # split-KV pieces (docs/architecture.md, "Split tail").
        self.tail = self._handle.tail
        # The planned kernel's label: tile, dtype, head dim, mask mode and variants, such as
        # "dense" or "dense-at-run-time" (docs/masks.md, "Dense tile lists"); None for the
        # decode kernel's plan.
        self.kernel = self._handle.kernel
        # Whether a mask's row blocks run largest first (the GPU packer's order, or one
        # uploaded from host lists; docs/architecture.md, "Row order of the tile lists").
        self.largest_first = self._handle.largest_first
        self._workspace = None
        self._decode = None
        if n_o:
            self._workspace = (torch.empty(n_o, dtype=_f32, device=q.device),
                               torch.empty(n_lse, dtype=_f32, device=q.device))
            self._ws_ptrs = (self._workspace[0].data_ptr(), self._workspace[1].data_ptr())
        else:
            self._ws_ptrs = (0, 0)
        # O in q's layout: a bshd plan writes contiguous [B, Sq, H, D].
        self._out_shape = qs
        self._lse_shape = (qs[0], qs[2], qs[1]) if self._bshd else qs[:3]
        self._lse_bytes = 4 * self._lse_shape[0] * self._lse_shape[1] * self._lse_shape[2]

    def run(self, q, k, v, *, return_lse=False):
        """The forward of q, k, v (the plan's shapes, strides, dtype and device): the
        output in q's layout (and the fp32 lse ``[B, H, Sq]`` with ``return_lse``).
        Runs that share a plan share its split-KV workspace: run them on one stream."""
        if _function_mode_on() and _default_device_only():
            with _no_torch_function():
                return self.run(q, k, v, return_lse=return_lse)
        dtype, device = self._dtype, self._device
        if not (type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor
                and q.dtype is dtype and k.dtype is dtype and v.dtype is dtype
                and q.get_device() == device and k.get_device() == device
                and v.get_device() == device):
            for name, t in (("q", q), ("k", k), ("v", v)):
                if (type(t) is not _Tensor or t.dtype is not dtype
                        or t.get_device() != device):
                    raise ValueError(
                        f"fragmask.AttentionPlan.run: {name} is not the plan's: expected a "
                        f"{dtype} tensor on cuda:{device}, got "
                        f"{getattr(t, 'dtype', type(t).__name__)} on "
                        f"{getattr(t, 'device', '?')}")
        if self._decode is not None:
            # Checked here (the decode plan takes addresses): q, k, v have the shapes and
            # strides of the plan's (contiguous) templates, so their memory is decode's.
            for name, t, spec in (("q", q, self._specs[0]), ("k", k, self._specs[1]),
                                  ("v", v, self._specs[2])):
                if t.shape != spec[0] or t.stride() != spec[1]:
                    raise ValueError(f"fragmask.AttentionPlan.run: {name} is not the plan's: "
                                     f"expected shape {spec[0]} and strides {spec[1]}")
            out, lse = _decode_launch_planned(self._decode, q, k, v, None, None, None, None,
                                              device, return_lse, self._ws_ptrs)
            return (out, lse.view(self._decode_lse)) if return_lse else out
        out = _empty_like(q, memory_format=_contiguous)
        stream = _get_stream(device)
        lse = None
        lse_ptr = 0 if return_lse else _lse_scratch(q, device, self._lse_bytes)
        if not lse_ptr:
            lse = q.new_empty(self._lse_shape, dtype=_f32)
            lse_ptr = lse.data_ptr()
        specs = self._specs
        if (q.shape == specs[0][0] and q.stride() == specs[0][1] and k.shape == specs[1][0]
                and k.stride() == specs[1][1] and v.shape == specs[2][0]
                and v.stride() == specs[2][1]):
            # The plan's views (compared here as tuples: no conversion into the extension).
            self._handle.run_ptrs(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                  lse_ptr, self._ws_ptrs[0], self._ws_ptrs[1], stream,
                                  "fragmask.AttentionPlan")
        else:  # the extension compares the views again and names the tensor that differs
            self._handle.run((q.data_ptr(), q.shape, q.stride()),
                             (k.data_ptr(), k.shape, k.stride()),
                             (v.data_ptr(), v.shape, v.stride()), out.data_ptr(), lse_ptr,
                             self._ws_ptrs[0], self._ws_ptrs[1], stream)
        return (out, lse) if return_lse else out


class DecodePlan:
    """A decode call planned once and run many times (``decode``'s arguments; the
    tensors given are templates: only their shapes, dtypes and device are read). The
    plan (checks, split count, kernel) and the split workspace are made here; ``run``
    checks that its tensors are the plan's, allocates o and lse and launches:
    CUDA-graph capturable, no host synchronisation. Runs that share a plan share its
    workspace: run them on one stream."""

    def __init__(self, q, k_cache, v_cache, *, block_table=None, seqlens_k=None,
                 cu_seqlens_q=None, max_seqlen_q=None, causal=False, window=None,
                 scale=None, splits=None, mask=None):
        torch = _torch()
        what = "fragmask.DecodePlan"
        _check_tensors(torch, what, [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)],
                       _DTYPES)
        ints = [(n, t) for n, t in (("block_table", block_table), ("seqlens_k", seqlens_k),
                                    ("cu_seqlens_q", cu_seqlens_q)) if t is not None]
        for n, t in ints:
            _check_tensors(torch, what, [(n, t)], ("int32",))
        if (cu_seqlens_q is None) != (max_seqlen_q is None):
            raise ValueError(f"{what}: max_seqlen_q goes with cu_seqlens_q")
        if splits is not None:
            _count_arg(what, "splits", splits, 1)
        if max_seqlen_q is not None:
            _count_arg(what, "max_seqlen_q", max_seqlen_q, 1)
        left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
        if causal:
            right = 0
        scale = 0.0 if scale is None else float(scale)
        if scale < 0 or scale != scale:
            raise ValueError(f"{what}: scale {scale} must be positive")
        self._mask_ptrs, mask_id = None, 0
        if mask is not None:
            if not isinstance(mask, Mask):
                raise TypeError(f"{what}: mask must be a fragmask.Mask, not "
                                f"{type(mask).__name__}")
            # The arrays are cached on the Mask, which the plan keeps alive.
            self._mask_ptrs = tuple(t.data_ptr()
                                    for t in _decode_mask_arrays(torch, mask, q.device))
            mask_id = mask._meta[8]
        self._mask = mask
        device = q.get_device()
        self._device = device
        self._hit = _decode_handle(q, k_cache, v_cache, block_table, seqlens_k, cu_seqlens_q,
                                   int(max_seqlen_q or 0), left, right, scale,
                                   0 if splits is None else splits, mask_id, device)
        handle, self._lse_shape, (ws_o, ws_lse), _, ws_lse_at = self._hit
        self._handle = handle
        self._mask_arg = _NO_MASK if self._mask_ptrs is None else self._mask_ptrs
        self.splits = handle.splits
        self._workspace = self._ws_ptrs = None
        if ws_o:
            self._workspace = torch.empty(ws_lse_at + ws_lse, dtype=_f32, device=q.device)
            ptr = self._workspace.data_ptr()
            self._ws_ptrs = (ptr, ptr + 4 * ws_lse_at)
        spec = lambda t: None if t is None else (t.shape, t.dtype)  # noqa: E731
        self._specs = tuple(spec(t) for t in (q, k_cache, v_cache, block_table, seqlens_k,
                                              cu_seqlens_q))
        self._plain = all(t is None for t in (block_table, seqlens_k, cu_seqlens_q))
        self._dtype = q.dtype
        self._q_shape, self._k_shape = q.shape, k_cache.shape

    def run(self, q, k_cache, v_cache, *, block_table=None, seqlens_k=None,
            cu_seqlens_q=None, return_lse=False):
        """The decode of q over the caches (the plan's shapes and dtypes, contiguous, on
        its device): o like q (and lse with ``return_lse``)."""
        if _function_mode_on() and _default_device_only():
            with _no_torch_function():
                return self.run(q, k_cache, v_cache, block_table=block_table,
                                seqlens_k=seqlens_k, cu_seqlens_q=cu_seqlens_q,
                                return_lse=return_lse)
        dtype, device = self._dtype, self._device
        if (self._plain and block_table is None and seqlens_k is None
                and cu_seqlens_q is None and type(q) is _Tensor and type(k_cache) is _Tensor
                and type(v_cache) is _Tensor and q.dtype is dtype and k_cache.dtype is dtype
                and v_cache.dtype is dtype and q.shape == self._q_shape
                and k_cache.shape == self._k_shape and v_cache.shape == self._k_shape
                and q.get_device() == device and k_cache.get_device() == device
                and v_cache.get_device() == device and q.is_contiguous()
                and k_cache.is_contiguous() and v_cache.is_contiguous()):
            # The plan's tensors without tables: straight to the launch.
            out = _empty_like(q)   # q is contiguous: so is out
            out_ptr = out.data_ptr()
            lse = None
            lse_ptr = 0
            if return_lse:
                lse = q.new_empty(self._lse_shape, dtype=_f32)
                lse_ptr = lse.data_ptr()
            ws = self._ws_ptrs
            # Without a workspace the kernel never touches it: out's address stands in.
            self._handle.run(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), out_ptr,
                             lse_ptr, out_ptr if ws is None else ws[0],
                             out_ptr if ws is None else ws[1], 0, 0, 0, self._mask_arg,
                             _get_stream(device))
            return (out, lse) if return_lse else out
        self._check(q, k_cache, v_cache, block_table, seqlens_k, cu_seqlens_q)
        out, lse = _decode_launch_planned(self._hit, q, k_cache, v_cache, block_table,
                                          seqlens_k, cu_seqlens_q, self._mask_ptrs, device,
                                          return_lse, self._ws_ptrs)
        return (out, lse) if return_lse else out

    def _check(self, *tensors):
        """Every tensor of a run against the plan (the path of calls with tables or
        lengths, and of mismatches, which it names)."""
        what = "fragmask.DecodePlan.run"
        names = ("q", "k_cache", "v_cache", "block_table", "seqlens_k", "cu_seqlens_q")
        for name, t, spec in zip(names, tensors, self._specs):
            if spec is None:
                if t is not None:
                    raise ValueError(f"{what}: {name} was not planned for")
                continue
            if (type(t) is not _Tensor or t.shape != spec[0] or t.dtype is not spec[1]
                    or t.get_device() != self._device or not t.is_contiguous()):
                raise ValueError(f"{what}: {name} is not the plan's: expected a contiguous "
                                 f"{spec[1]} {tuple(spec[0])} on cuda:{self._device}")
