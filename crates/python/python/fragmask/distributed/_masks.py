"""Compact mask descriptions for context parallelism (docs/distributed.md).

A description answers three questions without ever forming the global ``S x S`` mask:

* ``chunk_work(C)``: visible query-key pairs of each query chunk of ``C`` tokens (summed
  over the mask's heads), what the planner balances;
* ``chunk_needs(C)``: which key chunks each query chunk reads, what the exchange sends;
* ``local_mask(rows, keys, ...)``: the ``fragmask.Mask`` of some query rows against
  some key positions (rows ascending; keys in any order, whole chunks), packed from the rank's
  rows only.

numpy only, except ``local_mask`` (torch, the rank's GPU).
"""

import numpy as np

from .._mask import Mask


def _ints(x, name):
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name}: dtype {a.dtype} is not an integer type")
    return a.astype(np.int64, copy=False)


def _check_chunk(seqlen, chunk):
    if chunk <= 0 or seqlen % chunk:
        raise ValueError(f"the sequence of {seqlen} tokens is not a whole number of "
                         f"{chunk}-token chunks")
    return seqlen // chunk


def _transposed_on(mask, device):
    """The backward's transposed lists of a host-packed mask: on ``device``'s GPU, or
    on the CPU for a mask without partial tiles (nothing for the GPU pass to move)."""
    if mask.stats()["partial"] == 0:
        return mask.with_transposed()
    return mask.with_transposed(device=device)


class Intervals:
    """Each query row ``i`` sees the keys ``lo[i] ..= hi[i]`` (global positions, one
    interval per row; ``hi < lo``: no key). Causal, sliding-window, document (causal or
    not) and prefix masks are of this kind; see the constructors. Same for every head."""

    heads = 1

    def __init__(self, lo, hi):
        lo, hi = _ints(lo, "lo"), _ints(hi, "hi")
        if lo.ndim != 1 or lo.shape != hi.shape or lo.size == 0:
            raise ValueError("lo and hi must be 1-D arrays of the same nonzero length")
        S = lo.size
        self.seqlen = S
        self.lo = np.clip(lo, 0, S)
        self.hi = np.clip(hi, -1, S - 1)

    @classmethod
    def causal(cls, seqlen, window=None):
        """Causal (bottom-right = top-left for a square mask), optionally within a
        sliding ``window=(left, right)`` (-1 = unbounded; right is capped at 0)."""
        return cls.documents(np.zeros(int(seqlen), dtype=np.int64), causal=True,
                             window=window)

    @classmethod
    def sliding_window(cls, seqlen, left, right=0):
        """Keys ``i - left ..= i + right`` (-1 = unbounded), not causal unless right = 0."""
        return cls.documents(np.zeros(int(seqlen), dtype=np.int64), causal=False,
                             window=(left, right))

    @classmethod
    def documents(cls, doc_ids, causal=True, window=None):
        """Attention within documents: ``doc_ids`` ``[S]`` (equal ids = one document;
        each document a contiguous run of tokens), causal or not, optionally within a
        ``window=(left, right)``. ``from_predicate("causal", S, doc_ids=ids)`` is
        ``documents(ids)``."""
        ids = _ints(doc_ids, "doc_ids")
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("doc_ids must be a 1-D array with at least one token")
        S = ids.size
        pos = np.arange(S, dtype=np.int64)
        change = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [S])) - 1
        if np.unique(ids[starts]).size != starts.size:
            raise ValueError("doc_ids: a document is not one contiguous run of tokens")
        run = np.repeat(np.arange(starts.size), np.diff(np.concatenate((starts, [S]))))
        lo, hi = starts[run], ends[run]
        if causal:
            hi = pos.copy()
        if window is not None:
            left, right = (int(w) for w in window)
            if left >= 0:
                lo = np.maximum(lo, pos - left)
            if right >= 0:
                hi = np.minimum(hi, pos + right)
        return cls(lo, hi)

    def dense(self):
        """The global bool mask ``[1, S, S]`` (for checks on small sequences)."""
        cols = np.arange(self.seqlen)
        return ((cols[None, :] >= self.lo[:, None]) & (cols[None, :] <= self.hi[:, None]))[None]

    def row_counts(self):
        return np.maximum(self.hi - self.lo + 1, 0)

    def chunk_work(self, chunk):
        n = _check_chunk(self.seqlen, chunk)
        return self.row_counts().reshape(n, chunk).sum(1).astype(np.float64)

    def chunk_needs(self, chunk):
        """("ranges", first, last): query chunk c reads key chunks first[c] ..= last[c]
        (last < first: none)."""
        n = _check_chunk(self.seqlen, chunk)
        nonempty = (self.hi >= self.lo).reshape(n, chunk)
        big = np.iinfo(np.int64).max
        lo = np.where(nonempty, self.lo.reshape(n, chunk), big).min(1)
        hi = np.where(nonempty, self.hi.reshape(n, chunk), -1).max(1)
        any_ = nonempty.any(1)
        first = np.where(any_, lo // chunk, 0)
        last = np.where(any_, hi // chunk, -1)
        return ("ranges", first, last)

    def chunk_tiles(self, chunk):
        """Nonempty (query chunk, key chunk) tiles of each query chunk: what the kernels
        spend their time on (a partial tile costs a full one)."""
        _, first, last = self.chunk_needs(chunk)
        return np.maximum(last - first + 1, 0).astype(np.float64)

    def sees_all(self, rows, keys):
        """Whether every row of ``rows`` sees every key position of ``keys`` (each
        row's interval holds them all): a part that needs no mask."""
        rows, keys = np.asarray(rows, dtype=np.int64), np.asarray(keys, dtype=np.int64)
        if rows.size == 0 or keys.size == 0:
            return False
        return bool(self.lo[rows].max() <= keys.min() and self.hi[rows].min() >= keys.max())

    def own_documents(self, rows):
        """``(predicate, local doc ids)`` when the mask of ``rows`` against the same
        positions is causal (``"causal"``) or full (``"all"``) within runs of consecutive
        local tokens, so that a predicate mask with those document ids keeps its boundaries
        and the forward runs its documents grid (docs/architecture.md §3); else None.
        Row i's visible local keys are ``s[i] ..= e[i]``: a run starts where ``s[i] == i``
        and every row of it shares that start; causal ends at the row, full at the run's
        end."""
        p = np.asarray(rows, dtype=np.int64)
        n = p.size
        if n == 0 or np.any(p[1:] <= p[:-1]):
            return None
        s = np.searchsorted(p, self.lo[p], side="left")
        e = np.searchsorted(p, self.hi[p], side="right") - 1
        idx = np.arange(n)
        new = s == idx
        if not new[0]:
            return None
        doc = np.cumsum(new) - 1
        starts = idx[new]
        if not np.array_equal(s, starts[doc]):
            return None
        if np.array_equal(e, idx):
            return "causal", doc.astype(np.int32)
        ends = np.append(starts[1:], n) - 1
        if np.array_equal(e, ends[doc]):
            return "all", doc.astype(np.int32)
        return None

    def _own_documents_mask(self, rows, keys, block):
        """The own-keys Mask as a documents predicate (CPU-packed, O(tiles)), or None."""
        keys = np.asarray(keys)
        if keys.shape != np.shape(rows) or not np.array_equal(keys, rows):
            return None
        docs = self.own_documents(rows)
        if docs is None:
            return None
        predicate, ids = docs
        return Mask.from_predicate(predicate, len(ids), doc_ids=ids, block=block)

    def local_mask_cpu(self, rows, keys, block=(128, 128), partial=False):
        """The same Mask packed on the CPU (tests and small shapes)."""
        own = self._own_documents_mask(rows, keys, block)
        if own is not None:
            return own.with_transposed()
        keys = np.asarray(keys)
        dense = ((keys[None, :] >= self.lo[rows][:, None])
                 & (keys[None, :] <= self.hi[rows][:, None]))
        return Mask.from_dense(dense, block=block).with_transposed()

    def local_mask(self, rows, keys, device, block=(128, 128), partial=False):
        """Mask [1, 1, len(rows), len(keys)] packed on ``device`` from the rows'
        intervals (keys in any order, any subset): the rank forms only its rows against
        the keys it holds (len(rows) x len(keys) bytes, in slabs), then the GPU
        packer. The rows against themselves, where they are causal or full within runs
        (:meth:`own_documents`), are packed from those documents instead."""
        own = self._own_documents_mask(rows, keys, block)
        if own is not None:
            # Causal or full within documents: packed from the boundaries, so the forward
            # runs the documents grid on them.
            return _transposed_on(own, device)
        import torch

        keys_t = torch.as_tensor(np.asarray(keys), device=device)
        lo = torch.as_tensor(self.lo[rows], device=device)
        hi = torch.as_tensor(self.hi[rows], device=device)
        dense = torch.empty((len(rows), len(keys)), dtype=torch.bool, device=device)
        step = max(1, (1 << 28) // max(1, len(keys)))  # row slabs of at most 256 MiB
        for a in range(0, len(rows), step):
            b = min(a + step, len(rows))
            torch.logical_and(keys_t[None, :] >= lo[a:b, None], keys_t[None, :] <= hi[a:b, None],
                              out=dense[a:b])
        return Mask.from_dense(dense, block=block, transposed=True)


class BlockLists:
    """Write-up 002's (VSA's) block lists, as ``Mask.from_blocks`` takes them:
    ``index`` ``[(H,)Qb, maxK]``, ``num`` ``[(H,)Qb]``, ``sizes`` ``[Kb]`` (valid tokens
    of each key block, default all), ``block_size`` tokens per block. Self-attention:
    ``Qb == Kb``. Per-head lists give a per-head mask."""

    def __init__(self, index, num, sizes=None, block_size=64):
        index, num = _ints(index, "index"), _ints(num, "num")
        if index.ndim == 2:
            index, num = index[None], num[None]
        if index.ndim != 3 or num.shape != index.shape[:2]:
            raise ValueError("index must be [(H,) Qb, maxK] and num [(H,) Qb]")
        H, Qb, maxk = index.shape
        bs = int(block_size)
        if bs <= 0:
            raise ValueError("block_size must be positive")
        sizes = np.full(Qb, bs, dtype=np.int64) if sizes is None else _ints(sizes, "sizes")
        if sizes.shape != (Qb,):
            raise ValueError(f"sizes must have one entry per key block ({Qb})")
        if (num < 0).any() or (num > maxk).any():
            raise ValueError(f"num must lie in 0..={maxk}")
        valid = np.arange(maxk)[None, None, :] < num[..., None]
        if ((index < 0) | (index >= Qb))[valid].any():
            raise ValueError(f"index: a listed key block lies outside 0..{Qb}")
        self.index, self.num, self.sizes, self.block_size = index, num, np.clip(sizes, 0, bs), bs
        self.heads, self.seqlen = H, Qb * bs
        self._valid = valid

    def _block_ratio(self, chunk):
        _check_chunk(self.seqlen, chunk)
        if chunk % self.block_size:
            raise ValueError(f"chunks of {chunk} tokens cut {self.block_size}-token blocks")
        return chunk // self.block_size

    def chunk_work(self, chunk):
        r = self._block_ratio(chunk)
        keys = np.where(self._valid, self.sizes[np.where(self._valid, self.index, 0)], 0)
        per_block = keys.sum(axis=(0, 2)).astype(np.float64) * self.block_size
        return per_block.reshape(-1, r).sum(1)

    def _tile_triples(self, chunk):
        r = self._block_ratio(chunk)
        H, Qb, maxk = self.index.shape
        h = np.broadcast_to(np.arange(H)[:, None, None], self.index.shape)[self._valid]
        qc = np.broadcast_to((np.arange(Qb) // r)[None, :, None], self.index.shape)[self._valid]
        kc = self.index[self._valid] // r
        n = self.seqlen // chunk
        return np.unique((h * n + qc) * n + kc), n

    def chunk_tiles(self, chunk):
        """Nonempty (query chunk, key chunk) tiles of each query chunk, summed over
        heads."""
        keys, n = self._tile_triples(chunk)
        return np.bincount((keys // n) % n, minlength=n).astype(np.float64)

    def chunk_needs(self, chunk):
        r = self._block_ratio(chunk)
        n = self.seqlen // chunk
        need = np.zeros((n, n), dtype=bool)
        H, Qb, maxk = self.index.shape
        qchunk = np.broadcast_to((np.arange(Qb) // r)[None, :, None], self.index.shape)
        need[qchunk[self._valid], self.index[self._valid] // r] = True
        return ("matrix", need)

    def dense(self):
        """The global bool mask ``[H, S, S]`` (for checks on small sequences)."""
        m = Mask.from_blocks(self.index, self.num, self.sizes, block_size=self.block_size)
        return m.to_dense()[0]

    def local_lists(self, rows, keys, partial=False):
        """(index, num, sizes) of the rows' query blocks against the key blocks of
        ``keys`` (whole blocks in any order). A listed key block missing from ``keys``
        is an error, or with ``partial=True`` left out (a part of the rank's keys)."""
        bs = self.block_size
        qblocks = np.asarray(rows)[::bs] // bs
        kblocks = np.asarray(keys)[::bs] // bs
        where = np.full(self.seqlen // bs, -1, dtype=np.int64)
        where[kblocks] = np.arange(kblocks.size)
        index = self.index[:, qblocks]
        valid = self._valid[:, qblocks]
        local = np.where(valid, where[np.where(valid, index, 0)], -1)
        if partial:
            valid = valid & (local >= 0)
            order = np.argsort(~valid, axis=-1, kind="stable")     # kept entries first
            local = np.take_along_axis(local, order, axis=-1)
            valid = np.take_along_axis(valid, order, axis=-1)
        elif (local[valid] < 0).any():
            raise ValueError("the key positions do not hold every listed key block")
        return np.where(valid, local, 0), valid.sum(-1), self.sizes[kblocks]

    def local_mask_cpu(self, rows, keys, block=(128, 128), partial=False):
        index, num, sizes = self.local_lists(rows, keys, partial)
        return Mask.from_blocks(index, num, sizes, block_size=self.block_size,
                                seqlen_q=len(rows), seqlen_k=len(keys), block=block)

    def local_mask(self, rows, keys, device, block=(128, 128), partial=False):
        """Packed from the rows' lists by the CPU packer (compact: no dense rows), the
        backward's transposed lists built on ``device``."""
        return _transposed_on(self.local_mask_cpu(rows, keys, block, partial), device)


class TopK:
    """Top-k key indices per query row: ``indices`` ``[(H,)S, k]`` (global key
    positions, -1 = padding; no repeats in a row). Per-head indices give a per-head
    mask."""

    def __init__(self, indices):
        idx = _ints(indices, "indices")
        if idx.ndim == 2:
            idx = idx[None]
        if idx.ndim != 3 or idx.shape[1] == 0:
            raise ValueError("indices must be [(H,) S, k]")
        S = idx.shape[1]
        if ((idx < -1) | (idx >= S)).any():
            raise ValueError(f"indices must lie in 0..{S} (or be -1)")
        self.indices, self.heads, self.seqlen = idx, idx.shape[0], S

    def chunk_work(self, chunk):
        n = _check_chunk(self.seqlen, chunk)
        return (self.indices >= 0).sum(axis=(0, 2)).reshape(n, chunk).sum(1).astype(np.float64)

    def chunk_tiles(self, chunk):
        """Nonempty (query chunk, key chunk) tiles of each query chunk, summed over
        heads."""
        n = _check_chunk(self.seqlen, chunk)
        valid = self.indices >= 0
        H = self.heads
        h = np.broadcast_to(np.arange(H)[:, None, None], self.indices.shape)[valid]
        qc = np.broadcast_to((np.arange(self.seqlen) // chunk)[None, :, None],
                             self.indices.shape)[valid]
        keys = np.unique((h * n + qc) * n + self.indices[valid] // chunk)
        return np.bincount((keys // n) % n, minlength=n).astype(np.float64)

    def chunk_needs(self, chunk):
        n = _check_chunk(self.seqlen, chunk)
        need = np.zeros((n, n), dtype=bool)
        valid = self.indices >= 0
        qchunk = np.broadcast_to((np.arange(self.seqlen) // chunk)[None, :, None],
                                 self.indices.shape)
        need[qchunk[valid], self.indices[valid] // chunk] = True
        return ("matrix", need)

    def dense(self):
        """The global bool mask ``[H, S, S]`` (for checks on small sequences)."""
        return Mask.from_topk(self.indices, self.seqlen).to_dense()[0]

    def local_indices(self, rows, keys, partial=False):
        """The rows' indices as positions in ``keys`` (any order), -1 kept. A listed
        key missing from ``keys`` is an error, or with ``partial=True`` padding."""
        where = np.full(self.seqlen, -1, dtype=np.int64)
        where[np.asarray(keys)] = np.arange(len(keys))
        idx = self.indices[:, rows]
        local = np.where(idx >= 0, where[np.maximum(idx, 0)], -1)
        if not partial and ((idx >= 0) & (local < 0)).any():
            raise ValueError("the key positions do not hold every listed key")
        return local

    def local_mask_cpu(self, rows, keys, block=(128, 128), partial=False):
        return Mask.from_topk(self.local_indices(rows, keys, partial), len(keys), block=block)

    def local_mask(self, rows, keys, device, block=(128, 128), partial=False):
        """Packed from the rows' indices by the CPU packer, the transposed lists built
        on ``device``."""
        return _transposed_on(self.local_mask_cpu(rows, keys, block, partial), device)


class DenseRows:
    """A mask given row by row: ``rows(positions)`` returns the bool rows
    ``[(H,) len(positions), S]`` of those global query positions (a torch tensor on any
    device, or a numpy array), or ``mask`` is the dense ``[(H,) S, S]`` array itself
    (a rank then slices its rows). ``row_work`` (``[S]``, optional) gives each row's
    visible pairs summed over heads; without it the planner evaluates the rows, a slab
    at a time. ``all_keys=True`` says every query chunk reads every key chunk (a random
    mask), which spares the planner that scan."""

    def __init__(self, seqlen=None, rows=None, mask=None, heads=1, row_work=None,
                 all_keys=False, slab=4096):
        if (rows is None) == (mask is None):
            raise ValueError("give exactly one of rows= and mask=")
        if mask is not None:
            seqlen = mask.shape[-1]
            heads = mask.shape[0] if mask.ndim == 3 else 1
            if hasattr(mask, "detach"):
                import torch

                def rows(pos):
                    return mask[..., torch.as_tensor(pos, device=mask.device), :]
            else:
                def rows(pos):
                    return mask[..., pos, :]
        if seqlen is None:
            raise ValueError("seqlen is required with rows=")
        self.seqlen, self.heads, self._rows, self._slab = int(seqlen), int(heads), rows, slab
        self._row_work = None if row_work is None else np.asarray(row_work, np.float64)
        self._chunk_rows = {}
        self._all_keys = bool(all_keys)

    def _slabs(self, chunk):
        """(first chunk, per-chunk visible counts [n_slab_chunks], per-chunk key-chunk
        needs [n_slab_chunks, n]) for each slab of rows."""
        n = _check_chunk(self.seqlen, chunk)
        per = max(1, self._slab // chunk)
        for c0 in range(0, n, per):
            c1 = min(n, c0 + per)
            pos = np.arange(c0 * chunk, c1 * chunk)
            r = self._rows(pos)
            if hasattr(r, "detach"):
                r = r.detach()
                if r.dim() == 2:
                    r = r[None]
                r = r.reshape(r.shape[0], c1 - c0, chunk, n, chunk)
                counts = r.sum(dim=(0, 2, 3, 4)).cpu().numpy()
                needs = r.any(dim=4).any(dim=2).any(dim=0).cpu().numpy()
            else:
                r = np.asarray(r, dtype=bool)
                if r.ndim == 2:
                    r = r[None]
                r = r.reshape(r.shape[0], c1 - c0, chunk, n, chunk)
                counts = r.sum(axis=(0, 2, 3, 4))
                needs = r.any(axis=4).any(axis=2).any(axis=0)
            yield c0, counts, needs

    def _scan(self, chunk):
        hit = self._chunk_rows.get(chunk)
        if hit is None:
            n = _check_chunk(self.seqlen, chunk)
            work = np.zeros(n, np.float64)
            need = np.zeros((n, n), dtype=bool)
            for c0, counts, needs in self._slabs(chunk):
                work[c0:c0 + len(counts)] = counts
                need[c0:c0 + len(counts)] = needs
            hit = self._chunk_rows[chunk] = (work, need)
        return hit

    def chunk_work(self, chunk):
        if self._row_work is not None:
            n = _check_chunk(self.seqlen, chunk)
            return self._row_work.reshape(n, chunk).sum(1)
        return self._scan(chunk)[0]

    def chunk_tiles(self, chunk):
        """Nonempty (query chunk, key chunk) tiles of each query chunk (heads alike)."""
        _, need = self.chunk_needs(chunk)
        return need.sum(1).astype(np.float64) * self.heads

    def chunk_needs(self, chunk):
        if self._all_keys:
            n = _check_chunk(self.seqlen, chunk)
            return ("matrix", np.ones((n, n), dtype=bool))
        return ("matrix", self._scan(chunk)[1])

    def dense(self):
        """The global bool mask ``[H, S, S]`` (for checks on small sequences)."""
        r = self._rows(np.arange(self.seqlen))
        if hasattr(r, "detach"):
            r = r.detach().cpu().numpy()
        r = np.asarray(r, dtype=bool)
        return r[None] if r.ndim == 2 else r

    def local_mask_cpu(self, rows, keys, block=(128, 128), partial=False):
        r = self._rows(np.asarray(rows))
        if hasattr(r, "detach"):
            r = r.detach().cpu().numpy()
        r = np.asarray(r, dtype=bool)
        if r.ndim == 2:
            r = r[None]
        return Mask.from_dense(np.ascontiguousarray(r[:, :, np.asarray(keys)]), block=block)

    def local_mask(self, rows, keys, device, block=(128, 128), partial=False):
        """The rows sliced to ``keys`` (any subset) and packed by the GPU packer on
        ``device``."""
        import torch

        r = self._rows(rows)
        if not hasattr(r, "detach"):
            r = torch.from_numpy(np.ascontiguousarray(r))
        r = r.to(device)
        if r.dim() == 2:
            r = r[None]
        keys_t = torch.as_tensor(keys, device=device)
        dense = r.index_select(2, keys_t).to(torch.bool).contiguous()
        return Mask.from_dense(dense[None], block=block, transposed=True)
