"""``fragmask.Mask``: a packed attention mask (docs/masks.md)."""

import operator
import os
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

from . import _fragmask
from ._device import API as _API

_I64_MAX = 2**63 - 1


class BlockLists(NamedTuple):
    """One direction's tile lists, FlexAttention's ``BlockMask`` form (docs/masks.md):
    per row, the partial and the full blocks, ascending, and each partial entry's index
    into the words (-1 past the count).

    ``Mask.lists`` holds the forward lists, a row per (batch, head, query block) listing
    key blocks (``kv_num_blocks``, ``kv_indices``, ``full_kv_num_blocks``,
    ``full_kv_indices``, ``kv_tile_offsets``); ``Mask.transposed_lists`` the backward's,
    a row per (batch, head, key block) listing query blocks (``q_*``). Counts are int32
    ``[B, H, row blocks]``, the rest int32 ``[B, H, row blocks, listed blocks]``; the
    fields may be numpy arrays or tensors (``from_buffer``)."""

    num_blocks: Any
    indices: Any
    full_num_blocks: Any
    full_indices: Any
    tile_offsets: Any

    @classmethod
    def from_buffer(cls, buf, rows, tiles, counts_shape, entries_shape):
        """Views of a GPU pack's or transposition's int32 output buffer ``buf`` (a
        tensor laid out as the extension's packers write it: counts, full counts,
        ``rows`` each, then indices, full indices, tile offsets, ``tiles`` each)."""
        def counts(i):
            return buf[i * rows:(i + 1) * rows].view(*counts_shape)

        def entries(i):
            start = 2 * rows + i * tiles
            return buf[start:start + tiles].view(*entries_shape)

        return cls(counts(0), entries(0), counts(1), entries(1), entries(2))


def _np():
    import numpy

    return numpy


def _is_torch_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _to_numpy(x):
    """numpy array of x; a torch tensor goes through ``.numpy()`` (a CUDA tensor is
    copied to the host first: only ``from_dense`` packs CUDA tensors on the GPU)."""
    np = _np()
    if _is_torch_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _array(x, name, kind):
    """(array, buffer): a C-contiguous aligned array, passed to the extension as a
    buffer (the buffer protocol; never an address).

    kind "mask": bool, uint8 or int8 (nonzero = keep), passed as uint8.
    kind "index": any integer dtype, passed as int64 (uint64 values above the int64
    range become the int64 maximum, which the library reports as out of range).
    """
    np = _np()
    try:
        a = _to_numpy(x)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: cannot be read as an array ({e})") from None
    if kind == "mask":
        if a.dtype not in (np.bool_, np.uint8, np.int8):
            raise TypeError(f"{name}: dtype {a.dtype} is not bool, uint8 or int8")
        a = np.require(a, requirements="CA").view(np.uint8)
    else:
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name}: dtype {a.dtype} is not an integer type")
        if a.dtype == np.uint64 and a.size and a.max() > _I64_MAX:
            a = np.minimum(a, _I64_MAX)
        a = np.require(a, dtype=np.int64, requirements="CA")
    return a, a


def _int(name, value, lo, hi):
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if value < lo:
        raise ValueError(f"{name}={value} must be at least {lo}")
    if value > hi:
        raise ValueError(f"{name}={value} is too large: the limit is {hi}")
    return value


def _seqlen(name, value):
    return _int(name, value, 1, _fragmask.MAX_SEQLEN)


_TILES = {}


def _tile(block, warpgroups, swap_ab, encoding, threads, head_dim=None):
    """The tile keywords every constructor takes, checked, as the extension's args.
    ``block=None`` is the tile of the attention kernel a call with ``head_dim`` runs
    (``_fragmask.head_dim_tile``: 192x128 over 3 warpgroups at 64, 128x128 at 128, 128x80
    at 256), or (128, 128) without a head dim; a given ``block`` wins over ``head_dim``.
    ``warpgroups=None`` picks that tile's warpgroups, or else 2 when the MMA's M side
    (block_m, or block_n under ``swap_ab``) is a multiple of 128 and 1 otherwise:
    (128, 128) gets the attention kernel's 2 warpgroups, (64, 64) the 64-token tile's 1."""
    if block is None:
        if head_dim is None:
            block = (128, 128)
        else:
            block_m, block_n, tile_warpgroups = _fragmask.head_dim_tile(head_dim)
            block = (block_m, block_n)
            if warpgroups is None:
                warpgroups = tile_warpgroups
    plain = (type(block) is tuple and len(block) == 2 and type(block[0]) is int
             and type(block[1]) is int and type(warpgroups) in (int, type(None))
             and type(swap_ab) is bool and type(encoding) is str and type(threads) is int)
    if plain:
        key = (block, warpgroups, swap_ab, encoding, threads)
        hit = _TILES.get(key)
        if hit is not None:
            return hit
    if isinstance(block, (tuple, list)) and len(block) == 2:
        block_m, block_n = block
    else:
        raise TypeError(f"block must be a (block_m, block_n) tuple, not {block!r}")
    block_m = _int("block_m", block_m, 1, 2**32 - 1)
    block_n = _int("block_n", block_n, 1, 2**32 - 1)
    if not isinstance(swap_ab, bool):
        raise TypeError(f"swap_ab must be a bool, not {type(swap_ab).__name__}")
    if warpgroups is None:
        warpgroups = 2 if (block_n if swap_ab else block_m) % 128 == 0 else 1
    warpgroups = _int("warpgroups", warpgroups, 1, 2**32 - 1)
    if not isinstance(encoding, str):
        raise TypeError(f"encoding must be a str, not {type(encoding).__name__}")
    threads = _int("threads", threads, 0, _fragmask.MAX_THREADS)
    tile = (block_m, block_n, warpgroups, swap_ab, encoding, threads)
    if plain and len(_TILES) < 256:
        _TILES[key] = tile
    return tile


_MAX_PACKED_HEADER = 1 << 20   # as fragmask_masks::io::MAX_PACKED_HEADER_BYTES


def _check_packed_header(path):
    """Refuses a regular file whose safetensors header is not a packed mask's, or whose
    length differs from the data its header describes, reading at most the header
    (1 MiB). Anything it cannot open or that is no regular file is left to the
    extension's reader, which refuses it with the library's message."""
    import json
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return

    def corrupt(detail):
        return ValueError(f"{path}: corrupt file: packed mask file: {detail}")

    with os.fdopen(fd, "rb", buffering=0) as f:
        prefix = f.read(8)
        if len(prefix) < 8 or info.st_size < 9:
            raise corrupt("shorter than a safetensors header")
        n = int.from_bytes(prefix, "little")
        if n > _MAX_PACKED_HEADER:
            raise corrupt(f"its header length {n} exceeds {_MAX_PACKED_HEADER} bytes")
        if 8 + n > info.st_size:
            raise corrupt("its header length runs past the end of the file")
        header = f.read(n)
    try:
        described = json.loads(header)
    except (ValueError, UnicodeDecodeError) as e:
        raise corrupt(f"its header is not JSON ({e})") from None
    if not isinstance(described, dict):
        raise corrupt("its header is not a JSON object")
    meta = described.get("__metadata__")
    if not isinstance(meta, dict) or meta.get("format") != "fragmask-masks":
        raise corrupt("its metadata does not say format = fragmask-masks")
    end = 0
    for name, t in described.items():
        if name == "__metadata__":
            continue
        offsets = t.get("data_offsets") if isinstance(t, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int for o in offsets)):
            raise corrupt(f"tensor {name!r} has no valid data_offsets")
        end = max(end, offsets[1])
    if 8 + n + end != info.st_size:
        raise corrupt("its length differs from what its header describes "
                      "(truncated or extended)")


def _refuse_capture():
    """Refuses a read-back (a wait for the GPU) while torch's current stream is being
    captured into a CUDA graph, which the wait would invalidate."""
    from . import _ops

    if _ops._capturing is not None and _ops._capturing():
        raise RuntimeError("fragmask.Mask: reading a mask's lists back from the GPU waits "
                           "for the packer, which CUDA-graph capture forbids: call "
                           "mask.to('cpu') before capturing")


def _cuda_tensor(x):
    """Whether x is a torch CUDA tensor (torch imported by the caller already)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor) and x.is_cuda


class Mask:
    """A packed attention mask: FlexAttention-style tile lists plus the bits of every
    partial tile in the order each GPU thread consumes them (docs/masks.md).

    Build one with ``from_dense``, ``from_topk``, ``from_blocks``, ``from_predicate``
    or ``load``. Every constructor takes the tile keywords ``block=None`` (128x128, or
    with ``head_dim=`` the tile of the attention kernel for that head dim: 192x128 over
    3 warpgroups at 64, 128x128 at 128, 128x80 at 256; or ``(64, 64)``, the 64-token
    tile, and any other tile ``fragmask pack --block`` takes), ``head_dim=None``,
    ``warpgroups=None`` (the head dim's tile's, else 2 for a block_m multiple of 128,
    else 1; the head dim's tiles are the forward's: the backward reads 128x128, 64x64
    and 128x64, not head dim 64's 192x128 or 256's 128x80, and a call needing a
    backward refuses those before its forward),
    ``swap_ab=False``, ``encoding="fragment-native"`` (or ``"quad-lane"``,
    ``"row-major"``) and ``threads=0`` (packer threads, 0 = all cores). Bad input
    raises ValueError or TypeError with the library's message.
    """

    __slots__ = ("_host", "_gpu", "_gpu_t", "_t_read", "_device_cache", "_device_ptrs",
                 "_meta", "__weakref__")

    def __init__(self, packed):
        if not isinstance(packed, _fragmask.Packed):
            raise TypeError("use Mask.from_dense, from_topk, from_blocks, from_predicate "
                            "or load to build a Mask")
        self._host = packed
        # A GPU pack (from_dense on a CUDA tensor): (GpuPack, its i32 output buffer of
        # lists and words, device index);
        # the host lists are read back from it only when something asks for them.
        self._gpu = None
        # Transposed lists built on a GPU (with_transposed / from_dense(transposed=True)
        # on a GPU mask): (GpuTranspose, its i32 output buffer, device index), read back
        # into the host mask only when something asks for them.
        self._gpu_t = None
        # Whether the host mask's transposed lists were read back from _gpu_t's buffer (the
        # backward then plans with the host mask: _ops._device_transposed).
        self._t_read = False
        # Device copies of the lists for the GPU ops, built once per device (_ops.py),
        # and their addresses by device index (the eager fast path).
        self._device_cache = {}
        self._device_ptrs = {}
        # What the attention op needs, as plain ints (torch.compile traces plain Python,
        # not the extension's getters): B, H, Sq, Sk, block_m, block_n, warpgroups,
        # swap_ab, and the registry id the extension finds the packed mask by.
        b, h, sq, sk = packed.shape
        bm, bn, wg, swap = packed.tile
        self._meta = (b, h, sq, sk, bm, bn, wg, int(swap), packed.registry_id)

    @classmethod
    def _from_gpu(cls, plan, out, device):
        self = object.__new__(cls)
        self._host = None
        self._gpu = (plan, out, device)
        self._gpu_t = None
        self._t_read = False
        self._device_cache = {}
        self._device_ptrs = {}
        b, h, sq, sk = plan.shape
        bm, bn, wg, swap = plan.tile
        self._meta = (b, h, sq, sk, bm, bn, wg, int(swap), plan.registry_id)
        return self

    @property
    def _packed(self):
        """The host packed mask; a GPU pack (and a GPU transposition) is waited for and
        read back the first time (refused under CUDA-graph capture, which forbids the
        wait). From then on the ops find the mask by the host copy's registry entry, so
        its plans read the host lists (shared K/V, paired key blocks at 64x64) as a
        host-packed mask's do. Sound because the host copy is the device buffers' lists
        and words as they are (GpuPack.finish, GpuTranspose.finish: copied in place and
        validated, never reordered): the tables a plan builds from it hold the tile
        offsets the device words are indexed by. The device lists stay the same buffers."""
        packed = self._host
        if packed is not None and (self._gpu_t is None or packed.has_transposed):
            return packed
        _refuse_capture()
        if packed is None:
            packed = self._host = self._gpu[0].finish()
        if self._gpu_t is not None and not packed.has_transposed:
            packed = self._host = self._gpu_t[0].finish(packed)
            self._t_read = True
        # The registry entry the ops find the mask by (a GPU pack's geometry, or the host
        # mask this one was made from, which lives on in that mask) becomes the host copy's.
        self._meta = self._meta[:8] + (packed.registry_id,)
        return packed

    def to(self, device):
        """Places the lists on ``device`` now (once; later calls reuse them) and returns
        the mask (the same object: a mask is on the host and on every device it was
        placed on at once).

        A CUDA device: copies the lists there, with their largest-first dispatch orders
        (the forward's row blocks, the backward's key tiles; docs/architecture.md, "Row
        order of the tile lists"). Call it before ``torch.compile`` or CUDA-graph capture
        of code that uses the mask, so the traced code finds the lists and orders already
        there (the transposed lists of the backward pass too, when the mask has them). A
        mask packed on a GPU already has its lists and orders there.

        ``"cpu"``: reads back the lists built on a GPU (a GPU pack's forward lists, the
        transposed lists of ``transposed=True`` / ``with_transposed()``, and those a
        backward built on the GPU for a mask without them), which waits for the GPU
        once; a host-packed mask without such lists returns at once. From then on
        ``attention`` plans the mask as a host-packed one: at the 64x64 tile the
        forward's shared K/V and the backward's paired key blocks, whose tables are built
        from host lists (lists on the device only run without them). The device lists
        keep their addresses (a captured graph's stay valid). ``attention`` never reads
        back by itself (a wait per call of a per-step mask): call this once, after
        ``transposed=True`` or ``with_transposed()`` (a 64x64 mask read back without
        them gets them from the CPU at its first backward, as a host-packed one does, so
        that it pairs), before ``torch.compile`` traces the mask, and make one eager call
        before CUDA-graph capture (a call first planned under capture runs without the
        64x64 tile's tables). Under capture it raises
        ``RuntimeError``. Reading any of the mask's host lists (``stats``, ``lists``,
        ``save``...) reads its own back too."""
        if str(device).split(":")[0] == "cpu":
            self._read_back()
            return self
        from . import _ops

        torch = _ops._torch()
        _ops._device_lists(torch, self, device)
        if torch.device(device).type == "cuda" and self.has_transposed:
            _ops._device_transposed(torch, self, device)   # the backward's lists too
        return self

    def _read_back(self):
        """``to("cpu")``: the host lists of the mask, and of the transposed lists its
        backward built on a GPU (cached by _ops._device_transposed)."""
        host = self._packed
        built = [hit[2] for key, hit in list(self._device_cache.items())
                 if isinstance(key, str) and key.endswith(":transposed") and hit[2] is not self]
        unread = [src for src in built if src._gpu_t is not None and not src._t_read]
        for src in unread:
            if src._host is None and src._gpu is self._gpu:
                src._host = host   # the same pack's host copy: read once
            _ = src._packed
        if unread:
            # The eager path's backward plans of this mask were made with the GPU
            # transposition's geometry (no pairs): the next backward plans again.
            from . import _ops

            _ops._forget_backward_plans(self._meta[8])

    # Constructors ---------------------------------------------------------------

    @classmethod
    def from_dense(cls, mask, *, block=None, warpgroups=None, swap_ab=False,
                   encoding="fragment-native", threads=0, head_dim=None, transposed=False):
        """From a dense mask of bool, uint8 or int8 (nonzero = keep), ``[Sq, Sk]``,
        ``[H, Sq, Sk]`` or ``[B, H, Sq, Sk]`` (a leading 1 broadcasts).

        A CUDA tensor is packed on its GPU by the GPU packer, on torch's current stream,
        into buffers torch allocates: nothing is copied to the host and nothing waits.
        The mask's lists stay on that GPU for ``attention``; the host lists (files,
        stats, ``to_dense``, the list properties) are read back the first time one is
        asked for, which waits for the packer. ``to("cpu")`` reads them back explicitly;
        until then ``attention`` plans with the lists on the device only, so at
        ``block=(64, 64)`` it runs without the forward's shared K/V and the backward's
        paired key blocks, whose tables are built from host lists, and the backward
        without its largest-first tile order; a mask with no empty and no full tile gets
        dense tile lists where the kernel finds so in the packer's count when it runs (the
        forward at head dims 64 and 256 and the deterministic backward; docs/masks.md,
        "Dense lists checked at run time"), and reads its lists elsewhere; split-KV and
        the split tail assume every key block visited. Read back, it plans
        the mask as a host-packed one (``m = Mask.from_dense(cuda_mask, block=(64, 64),
        transposed=True).to("cpu")``: one wait for the packer). The GPU packer writes
        ``"fragment-native"`` words; another encoding packs a host copy on the CPU.

        A numpy array or CPU tensor is packed by the multithreaded CPU packer without
        copying a C-contiguous input. Both packers give the same mask, bit for bit.

        ``transposed=True`` adds the backward pass's transposed lists (as
        ``with_transposed()`` with its defaults): on the GPU, right after the GPU pack and
        on the same stream, for a CUDA tensor; on the CPU otherwise.

        ``head_dim=64`` (or 256) packs at the tile the forward kernel of that head dim runs
        (192x128, 128x80), up to 1.1x faster than 128x128 at head dim 64; with
        ``transposed=True`` it keeps 128x128, the backward's fastest tile. For training
        with the other constructors, keep their default tile too (the backward reads
        neither 192x128 nor 128x80). At head dim 256, a mask made of 128-token blocks runs
        faster at the default 128x128 than at 128x80, where each kept block is two or three
        80-key tiles (10% of the blocks kept, half their tokens, S = 16384, H = 16: 0.83
        against 0.95 ms on an H200); the CLI picks between the two by counting the key
        columns each would visit (``choice::pack_geometry``), which on a CUDA tensor would
        wait for the GPU, so ``from_dense`` takes the tile it is given.
        """
        # A mask for the backward too keeps 128x128 under head_dim=: the backward's
        # workspace pads query rows to 128 (ROW_PAD), which 192-row tiles overrun, and its
        # 64-key CTAs do not tile 80 keys (BackwardKernel::new).
        if transposed and head_dim is not None:
            _fragmask.head_dim_tile(head_dim)  # checked all the same
        tile = _tile(block, warpgroups, swap_ab, encoding, threads,
                     None if transposed else head_dim)
        if _cuda_tensor(mask) and tile[4] == "fragment-native":
            m = cls._from_dense_cuda(mask, tile)
        else:
            keep, raw = _array(mask, "mask", "mask")
            m = cls(_fragmask.pack_dense(raw, *tile))
        return m.with_transposed(threads=threads) if transposed else m

    @classmethod
    def _from_dense_cuda(cls, mask, tile):
        from . import _ops

        torch = _ops._torch()
        if mask.dtype not in (torch.bool, torch.uint8, torch.int8):
            raise TypeError(f"mask: dtype {str(mask.dtype)[6:]} is not bool, uint8 or int8")
        if not mask.is_contiguous():
            mask = mask.contiguous()  # on the device
        device = mask.get_device()
        plan = _API["gpu_pack_plan"](list(mask.shape), tile[0], tile[1], tile[2], tile[3],
                                      device)
        workspace_bytes, out_ints = plan.sizes[3:5]
        workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device=mask.device)
        out = torch.empty(out_ints, dtype=torch.int32, device=mask.device)
        plan.enqueue(mask.data_ptr(), mask.numel(), workspace.data_ptr(), out.data_ptr(),
                     _ops._get_stream(device))
        # The workspace goes back to torch's cache now: its next user is ordered after
        # the packer on this stream.
        return cls._from_gpu(plan, out, device)

    @classmethod
    def from_topk(cls, indices, seqlen_k, *, offsets=None, batch=None, heads=None,
                  seqlen_q=None, block=None, warpgroups=None, swap_ab=False,
                  encoding="fragment-native", threads=0, head_dim=None):
        """From top-k key indices (``fragmask pack --topk``).

        Fixed-k: ``indices`` is ``[Sq, k]``, ``[H, Sq, k]`` or ``[B, H, Sq, k]``, keys
        in any order, -1 = padding; a repeated key or one outside ``0..seqlen_k`` is an
        error. CSR: with ``offsets`` (1-D, ``B*H*Sq + 1`` entries), ``indices`` is 1-D
        and each row sorted strictly ascending; ``batch`` defaults to 1, ``heads`` to
        rows / (batch*seqlen_q) when ``seqlen_q`` is given and else 1.
        """
        tile = _tile(block, warpgroups, swap_ab, encoding, threads, head_dim)
        seqlen_k = _seqlen("seqlen_k", seqlen_k)
        keep = [None, None]
        keep[0], raw = _array(indices, "indices", "index")
        if offsets is None:
            for name, value in (("batch", batch), ("heads", heads), ("seqlen_q", seqlen_q)):
                if value is not None:
                    raise ValueError(f"{name}= applies to CSR lists only (give offsets=)")
            return cls(_fragmask.pack_topk(raw, seqlen_k, None, (None, None, None), *tile))
        keep[1], raw_offsets = _array(offsets, "offsets", "index")
        shape = (
            None if batch is None else _int("batch", batch, 1, _I64_MAX),
            None if heads is None else _int("heads", heads, 1, _I64_MAX),
            None if seqlen_q is None else _seqlen("seqlen_q", seqlen_q),
        )
        return cls(_fragmask.pack_topk(raw, seqlen_k, raw_offsets, shape, *tile))

    @classmethod
    def from_blocks(cls, index, num, sizes=None, *, block_size=64, seqlen_q=None,
                    seqlen_k=None, block=None, warpgroups=None, swap_ab=False,
                    encoding="fragment-native", threads=0, head_dim=None):
        """From write-up 002's block lists: ``index`` = ``q2k_block_sparse_index``
        ``[(B,)(H,)Qb, maxK]``, ``num`` = ``q2k_block_sparse_num`` ``[(B,)(H,)Qb]``,
        ``sizes`` = ``variable_block_sizes`` ``[Kb]`` (default: every key block whole).
        Query block ``qb`` attends to the first ``num`` listed key blocks; key block
        ``kb`` holds its first ``sizes[kb]`` of ``block_size`` tokens. ``seqlen_q`` /
        ``seqlen_k`` default to ``Qb*block_size`` / ``Kb*block_size``."""
        tile = _tile(block, warpgroups, swap_ab, encoding, threads, head_dim)
        block_size = _int("block_size", block_size, 1, _fragmask.MAX_SEQLEN)
        seqlen_q = None if seqlen_q is None else _seqlen("seqlen_q", seqlen_q)
        seqlen_k = None if seqlen_k is None else _seqlen("seqlen_k", seqlen_k)
        keep = [None, None, None]
        keep[0], raw_index = _array(index, "index", "index")
        keep[1], raw_num = _array(num, "num", "index")
        raw_sizes = None
        if sizes is not None:
            keep[2], raw_sizes = _array(sizes, "sizes", "index")
        return cls(_fragmask.pack_blocks(raw_index, raw_num, raw_sizes, block_size,
                                         seqlen_q, seqlen_k, *tile))

    @classmethod
    def from_predicate(cls, predicate, seqlen_q, seqlen_k=None, *, doc_ids=None,
                       block=None, warpgroups=None, swap_ab=False,
                       encoding="fragment-native", threads=0, head_dim=None):
        """From a predicate in the language of ``fragmask pack --predicate``:
        ``causal``, ``window=LEFT:RIGHT``, ``prefix=P``, ``doc=NAME``, ``all``,
        ``none``, combined with ``,``/``&``, ``|``, ``!`` and parentheses; ``@top-left``
        moves the diagonal to FlexAttention's convention (docs/masks.md).

        ``doc_ids``: an integer array ``[S]`` or ``[B, S]`` (one list for queries and
        keys, so ``S == seqlen_q == seqlen_k``), or a mapping from names to such arrays.
        ``doc=NAME`` atoms resolve through the mapping, or to the single array; a
        single array that the text does not name is ANDed with the predicate
        (``from_predicate("causal", S, doc_ids=ids)`` is causal within documents).
        ``seqlen_k`` defaults to ``seqlen_q``.
        """
        if not isinstance(predicate, str):
            raise TypeError(f"predicate must be a str, not {type(predicate).__name__}")
        tile = _tile(block, warpgroups, swap_ab, encoding, threads, head_dim)
        seqlen_q = _seqlen("seqlen_q", seqlen_q)
        seqlen_k = seqlen_q if seqlen_k is None else _seqlen("seqlen_k", seqlen_k)
        keep = []
        named, default = [], None
        if isinstance(doc_ids, Mapping):
            for name, ids in doc_ids.items():
                if not isinstance(name, str):
                    raise TypeError(f"doc_ids keys must be str, not {type(name).__name__}")
                a, raw = _array(ids, f"doc_ids[{name!r}]", "index")
                keep.append(a)
                named.append((name, raw))
        elif doc_ids is not None:
            a, default = _array(doc_ids, "doc_ids", "index")
            keep.append(a)
        return cls(_fragmask.pack_predicate(predicate, seqlen_q, seqlen_k, named, default,
                                            *tile))

    @classmethod
    def load(cls, path):
        """Reads and validates a file written by ``save`` or ``fragmask pack``: its
        header first (a file that is not a packed mask, or whose length differs from
        what its header describes, is refused before its body is read), then the
        whole file, with the SHA-256 of every tensor checked where the file has them
        (files written before checksums existed load unchecked)."""
        path = os.fspath(path)
        _check_packed_header(path)
        return cls(_fragmask.load(path))

    @classmethod
    def from_bytes(cls, data):
        """From the bytes of a packed-mask file (``to_bytes``)."""
        return cls(_fragmask.from_bytes(bytes(data)))

    # Output ---------------------------------------------------------------------

    def save(self, path):
        """Writes the safetensors file ``fragmask pack`` writes, whole or not at all
        (a temporary beside it and a rename; never over a directory, device or FIFO)."""
        self._packed.save(os.fspath(path))

    def to_bytes(self):
        """The file's bytes."""
        return bytes(self._packed.to_bytes())

    def to_dense(self):
        """The mask decoded to a bool numpy array ``[B, H, Sq, Sk]`` (B, H as stored:
        1 where it broadcasts). Memory ``B*H*Sq*Sk`` bytes: for checks and small masks."""
        np = _np()
        return np.frombuffer(self._packed.to_dense(), dtype=np.bool_).reshape(self.shape)

    def to_flex_block_mask(self, device=None, mask_mod=None):
        """``torch.nn.attention.flex_attention.BlockMask`` with the same tile lists
        (``BlockMask.from_kv_blocks``). The default ``mask_mod`` reads partial tiles'
        bits straight from the packed words (memory: the words, a tile-state table
        ``[B, H, Mb, Nb]`` and the tile's bit positions, never ``Sq*Sk``). ``device``
        defaults to CUDA when available, else the CPU. Needs torch."""
        from ._flex import to_flex_block_mask

        return to_flex_block_mask(self, device, mask_mod)

    # Properties -----------------------------------------------------------------

    @property
    def shape(self):
        """(B, H, Sq, Sk); B and H are 1 where the mask broadcasts."""
        return self._meta[:4]

    @property
    def block(self):
        """(block_m, block_n)."""
        return self._meta[4:6]

    @property
    def warpgroups(self):
        return self._meta[6]

    @property
    def swap_ab(self):
        return bool(self._meta[7])

    @property
    def encoding(self):
        """"fragment-native", "quad-lane" or "row-major"."""
        return "fragment-native" if self._host is None else self._host.encoding

    @property
    def device(self):
        """The CUDA device index a mask packed on the GPU lives on, else None."""
        return None if self._gpu is None else self._gpu[2]

    def density(self):
        """Fraction of kept elements."""
        return self._packed.stats()["density"]

    def stats(self):
        """Tile counts (tiles, empty, full, partial), ones, elements, density and bytes
        (as ``fragmask inspect`` reports them)."""
        return self._packed.stats()

    def shared_kv_load_ratio(self):
        """On a one-warpgroup 64x64 mask, the K/V blocks its forward's query-block pairs
        load over what the blocks load alone (``fragmask inspect`` prints it): the
        shared-K/V tile is the default at head dim 128 where it is at most 0.55, else the
        one-block tile runs. None for other tiles. Builds the pairs (milliseconds)."""
        return self._packed.shared_kv_load_ratio()

    def metadata(self):
        """The file's ``__metadata__`` (all strings)."""
        return self._packed.metadata()

    def _list(self, name, dtype):
        np = _np()
        data, dims = self._packed.list(name)
        return np.frombuffer(data, dtype=dtype).reshape(dims)

    def _block_list(self, transposed, part):
        np = _np()
        data, dims = self._packed.block_list(transposed, part)
        return np.frombuffer(data, dtype="=i4").reshape(dims)

    def _block_lists(self, transposed):
        return BlockLists(*(self._block_list(transposed, part) for part in range(5)))

    @property
    def lists(self):
        """The forward tile lists (``BlockLists`` of int32 arrays): per (batch, head,
        query block) the partial and full key blocks, as ``kv_num_blocks``,
        ``kv_indices``, ``full_kv_num_blocks``, ``full_kv_indices`` and
        ``kv_tile_offsets`` name them."""
        return self._block_lists(False)

    @property
    def kv_num_blocks(self):
        """int32 ``[B, H, Mb]``: partial tiles per row block (``lists.num_blocks``)."""
        return self._block_list(False, 0)

    @property
    def kv_indices(self):
        """int32 ``[B, H, Mb, Nb]``: partial tiles' column blocks, ascending."""
        return self._block_list(False, 1)

    @property
    def full_kv_num_blocks(self):
        """int32 ``[B, H, Mb]``: full tiles per row block."""
        return self._block_list(False, 2)

    @property
    def full_kv_indices(self):
        """int32 ``[B, H, Mb, Nb]``: full tiles' column blocks, ascending."""
        return self._block_list(False, 3)

    @property
    def kv_tile_offsets(self):
        """int32 ``[B, H, Mb, Nb]``: index into ``words`` of partial tile
        ``kv_indices[..., j]``; -1 past the count."""
        return self._block_list(False, 4)

    @property
    def words(self):
        """uint32 ``[P, ...]``: the partial tiles' bits (shape per encoding,
        docs/masks.md)."""
        return self._list("words", "=u4")

    # The backward pass's transposed lists (format v2) ---------------------------------

    def with_transposed(self, *, warpgroups=None, swap_ab=True, threads=0, device=None):
        """This mask with the backward pass's transposed lists and words added (as
        ``fragmask pack --transposed``; ``save`` then writes a version-2 file): for
        each (batch, head, key block), the query blocks whose tile is partial
        (``q_indices``) and full (``full_q_indices``), FlexAttention's ``q_*`` lists,
        and the partial tiles' bits in the register order of the backward
        accumulator (SwapAB by default; docs/masks.md).

        A mask packed on a GPU (``from_dense`` of a CUDA tensor) gets them on that GPU
        (the GPU packer's transposed lists, on torch's current stream, nothing copied to
        the host or waited for); so does any fragment-native mask with ``device`` a CUDA
        device (its lists are copied there first, as ``to(device)`` does). Otherwise
        the CPU builds them (``threads`` workers). Both give the same bits."""
        gpu = self._gpu
        if device is not None and gpu is None and self.encoding == "fragment-native":
            from . import _ops

            torch = _ops._torch()
            device = torch.device(device)
            if device.type == "cuda":
                return self._with_transposed_gpu(torch, device, warpgroups, swap_ab)
        if gpu is not None and self._gpu_t is None:
            from . import _ops

            torch = _ops._torch()
            return self._with_transposed_gpu(torch, torch.device("cuda", gpu[2]), warpgroups,
                                             swap_ab)
        if warpgroups is not None:
            warpgroups = _int("warpgroups", warpgroups, 1, 2**32 - 1)
        threads = _int("threads", threads, 0, _fragmask.MAX_THREADS)
        if not isinstance(swap_ab, bool):
            raise TypeError(f"swap_ab must be a bool, not {type(swap_ab).__name__}")
        return Mask(self._packed.with_transposed(warpgroups, swap_ab, threads))

    def _with_transposed_host(self):
        """with_transposed's defaults built by the CPU from the host lists (read back
        first for a GPU pack), whatever device the mask was packed on."""
        return Mask(self._packed.with_transposed(None, True, 0))

    def _with_transposed_gpu(self, torch, device, warpgroups, swap_ab):
        """with_transposed on `device` (a CUDA device): the GPU packer's transposed lists
        from the mask's device lists, into tensors torch allocates."""
        from . import _ops

        if warpgroups is not None:
            warpgroups = _int("warpgroups", warpgroups, 1, 2**32 - 1)
        index = device.index if device.index is not None else torch.cuda.current_device()
        device = torch.device("cuda", index)
        if self._gpu is not None and self._gpu[2] == index:
            capacity = self._gpu[0].sizes[1]          # a GPU pack: its count is on the device
        else:
            capacity = self._packed.stats()["partial"]
            if capacity == 0:
                # No partial tile: no words, whose empty device copy has no address the GPU
                # packer could take; the CPU transposes the lists alone (the same bits).
                return Mask(self._packed.with_transposed(warpgroups, swap_ab, 0))
        lists = _ops._device_lists(torch, self, device)
        b, h, sq, sk, bm, bn, wg, swap = self._meta[:8]
        plan = _API["gpu_transpose_plan"]((b, h, sq, sk), (bm, bn, wg, bool(swap)),
                                           warpgroups, bool(swap_ab), capacity, index)
        workspace_bytes, out_ints = plan.sizes[3:5]
        workspace = torch.empty(workspace_bytes, dtype=torch.uint8, device=device)
        out = torch.empty(out_ints, dtype=torch.int32, device=device)
        plan.enqueue(tuple(t.data_ptr() for t in lists), workspace.data_ptr(), out.data_ptr(),
                     _ops._get_stream(index))
        m = object.__new__(Mask)
        m._host = self._host    # the host copy, if any, gets them when first asked for
        m._gpu = self._gpu
        m._gpu_t = (plan, out, index)
        m._t_read = False
        # Not decode's form: it is kept under this mask's registry id, which m's read-back
        # changes.
        m._device_cache = {key: hit for key, hit in self._device_cache.items()
                           if not (isinstance(key, tuple) and key[0] == "decode")}
        m._device_ptrs = dict(self._device_ptrs)
        m._meta = self._meta
        return m

    @property
    def has_transposed(self):
        """Whether the transposed lists are present (``with_transposed`` adds them)."""
        if self._gpu_t is not None:
            return True
        if self._host is None:
            return False   # a GPU pack without them: no need to read it back
        return self._packed.has_transposed

    @property
    def transposed_lists(self):
        """The backward pass's transposed tile lists (``BlockLists`` of int32 arrays;
        needs ``with_transposed``): per (batch, head, key block) the partial and full
        query blocks, as ``q_num_blocks``, ``q_indices``, ``full_q_num_blocks``,
        ``full_q_indices`` and ``q_tile_offsets`` name them."""
        return self._block_lists(True)

    @property
    def q_num_blocks(self):
        """int32 ``[B, H, Nb]``: partial tiles per key block (needs ``with_transposed``;
        ``transposed_lists.num_blocks``)."""
        return self._block_list(True, 0)

    @property
    def q_indices(self):
        """int32 ``[B, H, Nb, Mb]``: partial tiles' query blocks, ascending."""
        return self._block_list(True, 1)

    @property
    def full_q_num_blocks(self):
        """int32 ``[B, H, Nb]``: full tiles per key block."""
        return self._block_list(True, 2)

    @property
    def full_q_indices(self):
        """int32 ``[B, H, Nb, Mb]``: full tiles' query blocks, ascending."""
        return self._block_list(True, 3)

    @property
    def q_tile_offsets(self):
        """int32 ``[B, H, Nb, Mb]``: index into ``q_words`` of partial tile
        ``q_indices[..., j]``; -1 past the count."""
        return self._block_list(True, 4)

    @property
    def q_words(self):
        """uint32 ``[P, words per tile]``: the partial tiles' bits in the backward
        accumulator's order."""
        np = _np()
        data, dims = self._packed.transposed_words()
        return np.frombuffer(data, dtype="=u4").reshape(dims)

    @property
    def bit_positions(self):
        """uint32 ``[block_m, block_n]``: bit of element (row, col) of a tile within
        the tile's words (word ``p // 32``, bit ``p % 32``)."""
        return self._list("positions", "=u4")

    # Python protocol ------------------------------------------------------------

    def __eq__(self, other):
        if isinstance(other, Mask):
            return self._packed == other._packed
        return NotImplemented

    __hash__ = None

    def __reduce__(self):
        return (Mask.from_bytes, (self.to_bytes(),))

    def __repr__(self):
        s = self.stats()
        return (f"Mask(shape={self.shape}, block={self.block}, warpgroups={self.warpgroups}"
                f"{', swap_ab=True' if self.swap_ab else ''}, encoding={self.encoding!r}, "
                f"partial={s['partial']}, full={s['full']}, empty={s['empty']}, "
                f"density={s['density']:.4f})")
