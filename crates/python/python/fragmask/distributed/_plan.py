"""The context-parallel planner: chunks of the sequence to ranks, equal token counts,
balanced work (visible query-key pairs), few K/V chunks to move (docs/distributed.md).

Candidates, each refined by swaps of one chunk between the most and least loaded
ranks (which keep every rank's chunk count):

* ``zigzag``: 2P contiguous segments, rank r holds segments r and 2P-1-r (the causal
  floor of ring / Llama-3 style context parallelism);
* ``contiguous``: rank r holds the r-th P-th of the sequence (no traffic for documents
  that fall inside one rank);
* ``greedy``: longest-processing-time first over chunks by work, each to the least
  loaded rank with room (MagiAttention's greedy dispatch by mask area, with the
  equal-count constraint);
* ``segments`` (interval masks: documents): the sequence cut only where few query-key
  pairs cross the cut (document boundaries), whole segments to ranks
  longest-processing-time first, the leftover room filled with the pieces whose cut
  costs least. A document on one rank has no rows that read remote keys.

The plan is the candidate with the fewest remote (query chunk, key chunk) tiles (what
the rows that read other ranks' keys cost: a second kernel pass and a merge), then the
least K/V traffic, among those within the balance bound, else the best balanced. numpy
only: the CPU plans 1M tokens in milliseconds.
"""

import numpy as np


class Plan:
    """Where every token lives.

    ``permutation`` (int64 ``[S]``): rank r holds the global tokens
    ``permutation[r*S//P:(r+1)*S//P]`` (its chunks, ascending). ``chunks[r]``: rank r's
    chunk ids (ascending); ``kv_chunks[r]``: the key chunks its queries read
    (ascending, own ones included); ``recv_chunks[r][s]`` / ``send_chunks[r][d]``: key chunks rank r
    receives from rank s / sends to rank d. ``work[r]``: visible pairs of rank r's
    queries; ``imbalance``: max(work) / mean(work) - 1."""

    def __init__(self, mask, world_size, chunk, owner, strategy, work=None, needs=None):
        P, n = world_size, owner.size
        self.mask, self.world_size, self.chunk, self.strategy = mask, P, chunk, strategy
        self.seqlen = n * chunk
        self.owner = owner
        order = np.argsort(owner, kind="stable")          # rank-major, chunks ascending
        self.chunks = order.reshape(P, n // P)
        self.permutation = (self.chunks[:, :, None] * chunk
                            + np.arange(chunk)[None, None, :]).reshape(-1)
        self.chunk_work = mask.chunk_work(chunk) if work is None else work
        self.work = np.bincount(owner, weights=self.chunk_work, minlength=P)
        mean = self.work.mean()
        self.imbalance = float(self.work.max() / mean - 1.0) if mean > 0 else 0.0
        # Which key chunks each query chunk reads (the description's answer, kept for
        # the exchange's schedule: _exchange.schedule).
        self.chunk_needs = mask.chunk_needs(chunk) if needs is None else needs
        need = _needed(self.chunk_needs, owner, P)
        self.kv_chunks = [np.flatnonzero(need[r]) for r in range(P)]
        self.recv_chunks = [[c[owner[c] == s] if s != r else c[:0]
                             for s in range(P)] for r, c in enumerate(self.kv_chunks)]
        self.send_chunks = [[self.recv_chunks[d][r] for d in range(P)] for r in range(P)]

    @property
    def local_seqlen(self):
        return self.seqlen // self.world_size

    def positions(self, rank):
        """Global token positions rank ``rank`` holds (ascending)."""
        S = self.local_seqlen
        return self.permutation[rank * S:(rank + 1) * S]

    def kv_positions(self, rank):
        """Global positions of the keys of rank ``rank``'s local attention, in its key
        order: all its own tokens (plan order), then the chunks it receives, source rank
        by source rank, each source's ascending."""
        recv = np.concatenate([self.recv_chunks[rank][s] for s in range(self.world_size)])
        got = (recv[:, None] * self.chunk + np.arange(self.chunk)[None, :]).reshape(-1)
        return np.concatenate([self.positions(rank), got])

    def sent_tokens(self):
        """K/V tokens each rank sends (``[P]``)."""
        return np.array([sum(len(c) for c in self.send_chunks[r]) * self.chunk
                         for r in range(self.world_size)], dtype=np.int64)

    def traffic(self):
        """Key chunks moved in all, against the (P-1)·n of an all-gather."""
        return int(sum(len(c) for row in self.recv_chunks for c in row))

    def remote_tiles(self):
        """Per rank, (query chunks that read another rank's keys, (query chunk, key
        chunk) tiles they read there): the rows and tiles of the rank's passes over
        received keys (``[P, 2]`` int64)."""
        return _remote_tiles(self.chunk_needs, self.owner, self.world_size)

    # Laying tensors out in plan order -------------------------------------------------

    def to_plan_order(self, x, dim=-2):
        """``x`` (numpy or torch) with its sequence dim ``dim`` (length S) permuted into
        plan order: rank r's shard is the r-th of P equal slices."""
        return _take(x, self.permutation, dim)

    def from_plan_order(self, x, dim=-2):
        """Undoes ``to_plan_order``."""
        return _take(x, np.argsort(self.permutation), dim)

    def shard(self, x, rank, dim=-2):
        """Rank ``rank``'s tokens of the global ``x`` (sequence dim ``dim``), in plan
        order: ``to_plan_order(x)`` sliced, without the other ranks' rows."""
        return _take(x, self.positions(rank), dim)

    def unshard(self, shards, dim=-2):
        """The global tensor from the P shards (list, rank order) in global order."""
        if hasattr(shards[0], "detach"):
            import torch

            return self.from_plan_order(torch.cat(list(shards), dim=dim), dim)
        return self.from_plan_order(np.concatenate(shards, axis=dim), dim)

    def __repr__(self):
        return (f"Plan(seqlen={self.seqlen}, world_size={self.world_size}, "
                f"chunk={self.chunk}, strategy={self.strategy!r}, "
                f"imbalance={self.imbalance:.4f}, traffic={self.traffic()} chunks)")


def _take(x, index, dim):
    if hasattr(x, "detach"):
        import torch

        return x.index_select(dim, torch.as_tensor(index, device=x.device))
    return np.take(x, index, axis=dim)


def _needed(needs, owner, P):
    """bool [P, n]: the key chunks each rank's queries read."""
    kind, *data = needs
    n = owner.size
    if kind == "ranges":
        first, last = data
        cover = np.zeros((P, n + 1), dtype=np.int64)
        ok = last >= first
        np.add.at(cover, (owner[ok], first[ok]), 1)
        np.add.at(cover, (owner[ok], last[ok] + 1), -1)
        return np.cumsum(cover[:, :n], axis=1) > 0
    (matrix,) = data
    out = np.zeros((P, n), dtype=bool)
    for r in range(P):
        out[r] = matrix[owner == r].any(0)
    return out


def _remote_tiles(needs, owner, P):
    """[P, 2]: per rank, its query chunks that read a key chunk of another rank, and
    the (query chunk, key chunk) tiles of those reads."""
    kind, *data = needs
    n = owner.size
    out = np.zeros((P, 2), dtype=np.int64)
    if kind == "ranges":
        first, last = (np.asarray(x, np.int64) for x in data)
        ok = last >= first
        f = np.where(ok, first, 0)
        l1 = np.where(ok, last + 1, 0)
        for r in range(P):
            own = np.concatenate(([0], np.cumsum(owner == r)))
            remote = (l1 - f) - (own[l1] - own[f])
            mine = owner == r
            out[r] = ((remote[mine] > 0).sum(), remote[mine].sum())
        return out
    (matrix,) = data
    for r in range(P):
        rows = matrix[owner == r][:, owner != r]
        out[r] = (rows.any(1).sum(), rows.sum())
    return out


def _cut_costs(needs, n):
    """``cross[c]`` (``c`` in 0..=n) for an interval mask: the needed (query chunk,
    key chunk) pairs on opposite sides of the boundary before chunk ``c``; None for
    other masks. O(n): a pair (q, k < q) counts for every c in (k, q] and (q, k > q)
    for every c in (q, k], summed with second differences."""
    kind, *data = needs
    if kind != "ranges":
        return None
    first, last = (np.asarray(x, np.int64) for x in data)
    q = np.arange(n, dtype=np.int64)
    ok = last >= first
    size = n + 3
    d2 = np.zeros(size)
    d1 = np.zeros(size)
    a, b = first, np.minimum(last, q - 1)                 # keys before the row chunk
    m = ok & (b >= a)
    d2 += np.bincount(a[m] + 1, minlength=size) - np.bincount(b[m] + 2, minlength=size)
    d1 -= np.bincount(q[m] + 1, weights=(b - a + 1)[m], minlength=size)
    a, b = np.maximum(first, q + 1), last                 # keys after it
    m = ok & (b >= a)
    d1 += np.bincount(q[m] + 1, weights=(b - a + 1)[m], minlength=size)
    d2 += np.bincount(b[m] + 2, minlength=size) - np.bincount(a[m] + 1, minlength=size)
    return np.cumsum(np.cumsum(d2) + d1)[:n + 1]


# Two ranks and at most this many segments: every subset is tried (_two_way).
MAX_TWO_WAY_SEGMENTS = 16
# What a query chunk that reads remote keys costs beside its remote tiles, in tiles:
# its rows gathered, merged and their dq added (about six passes over 128 rows x
# heads x head dim, against about one tile's time per pass: measured on H100).
ROW_CHUNK_TILES = 2.0


def _two_way_choices(bounds, m):
    """Every way for rank 0 of two to hold ``m`` chunks: a subset of whole segments
    (``bounds``), filled where it holds fewer with the head or the tail of one other
    segment. Returns ``inc`` (subset x segment membership) and the choices as arrays
    ``(sub, seg, lo, hi)``: the subset, the segment cut (-1: none) and the chunks
    ``[lo, hi)`` taken from it (empty where none is cut); whole subsets first, then per
    segment its heads, then its tails (the planners' tie order). None for no choice."""
    k = bounds.size - 1
    a, b = bounds[:-1], bounds[1:]
    size = b - a
    subsets = np.arange(1 << k, dtype=np.int64)
    inc = ((subsets[:, None] >> np.arange(k)) & 1).astype(bool)
    room = m - inc @ size
    parts = []
    whole = np.flatnonzero(room == 0)
    if whole.size:
        none = np.zeros(whole.size, np.int64)
        parts.append((whole, none - 1, none, none))
    for j in range(k):
        idx = np.flatnonzero(~inc[:, j] & (room > 0) & (room < size[j]))
        if not idx.size:
            continue
        r = room[idx]
        for head in (True, False):
            lo = np.full(r.size, a[j]) if head else b[j] - r
            parts.append((idx, np.full(idx.size, j), lo, lo + r))
    if not parts:
        return inc, None
    return inc, tuple(np.concatenate(x) for x in zip(*parts))


def _two_way_owner(bounds, inc, n, sub, seg, lo, hi):
    """The owner (0 or 1) of each of ``n`` chunks under one ``_two_way_choices`` choice."""
    owner = np.ones(n, dtype=np.int64)
    for t in np.flatnonzero(inc[sub]):
        owner[bounds[t]:bounds[t + 1]] = 0
    if seg >= 0:
        owner[lo:hi] = 0
    return owner


def _two_way_best(bounds, inc, choices, est, heavy, limit, top, cost):
    """Among the choices whose heavier rank's load ``heavy`` is at most ``limit``, the
    ``top`` best by ``est`` scored exactly by ``cost(owner)`` (ties: the earlier choice);
    the owner array of the best, or None if no choice holds the limit."""
    ok = np.flatnonzero(heavy <= limit)
    if not ok.size:
        return None
    n = int(bounds[-1])
    best = None
    for i in ok[np.argsort(est[ok], kind="stable")[:top]]:
        owner = _two_way_owner(bounds, inc, n, *(int(x[i]) for x in choices))
        key = (cost(owner), int(i))
        if best is None or key < best[0]:
            best = (key, owner)
    return best[1]


def _prefix(x):
    """Prefix sums with a leading 0: the sum of ``x[lo:hi]`` is ``c[hi] - c[lo]``."""
    return np.concatenate(([0.0], np.cumsum(x)))


def _two_way(bounds, work, tiles, cross, needs, m, limit, top=32):
    """Two ranks: rank 0 takes every subset of whole segments in turn, filled to m
    chunks with the head or the tail of one other segment (``_two_way_choices``); among
    the choices whose heavier rank's ``work`` is at most ``limit``, the one whose slower
    rank has the fewest tiles plus remote tiles plus ``ROW_CHUNK_TILES`` per query chunk
    that reads remote keys (the kernels' time: a partial tile costs a full one, a remote
    tile a pass of its own, a remote row its gather and merge). The ``top`` best by an
    estimate (the split's crossing pairs charged to both ranks) are scored exactly. None
    if no choice holds the limit."""
    inc, choices = _two_way_choices(bounds, m)
    if choices is None:
        return None
    sub, seg, lo, hi = choices
    a, b = bounds[:-1], bounds[1:]
    cw, ct = _prefix(work), _prefix(tiles)
    w0 = (inc @ (cw[b] - cw[a]))[sub] + cw[hi] - cw[lo]
    t0 = (inc @ (ct[b] - ct[a]))[sub] + ct[hi] - ct[lo]
    cut = np.where(lo == a[seg], hi, lo)            # a head ends at its cut, a tail starts at it
    est = np.maximum(t0, ct[-1] - t0) + np.where(seg >= 0, cross[cut], 0.0)
    heavy = np.maximum(w0, cw[-1] - w0)
    return _two_way_best(bounds, inc, choices, est, heavy, limit, top,
                         lambda owner: _time_cost(owner, tiles, needs, 2))


def _time_cost(owner, tiles, needs, P):
    """The slower rank's tiles + remote tiles + ``ROW_CHUNK_TILES`` per query chunk
    that reads remote keys (what ``_two_way`` minimises)."""
    remote = _remote_tiles(needs, owner, P)
    cost = (np.bincount(owner, weights=tiles, minlength=P) + remote[:, 1]
            + ROW_CHUNK_TILES * remote[:, 0])
    return float(cost.max())


# Token cuts (``plan(..., token_cuts=True)``): an interval mask whose documents do not
# start on chunk boundaries leaves, wherever two neighbouring documents go to different
# ranks, a sliver of one inside the other's boundary chunk; every row of that document
# then reads the sliver's keys from the other rank (a remote pass and a merge over the
# whole document), or the sliver's rows read the whole other document. Planned in
# 1-token chunks, documents are cut at their own boundaries and only the documents
# split to fill a rank read remote keys. The estimated cost of a rank, in visible
# pairs (what the planner balances): its rows' pairs, plus REMOTE_PAIR per pair its
# rows read from other ranks (a second kernel pass over them), REMOTE_ROW per row that
# reads remote keys (its gather, merge and dq add: a sixteenth of a full 128 x 128
# tile's pairs per row), REMOTE_PASS per rank with any such row (the remote passes'
# launches and wave tails: about 50 us, the time of this many pairs at 16 heads on one
# H100). Set from the phase tables of 2xH100 runs (docs/distributed.md), not fitted.
REMOTE_PAIR = 1.0
REMOTE_ROW = 1000.0
REMOTE_PASS = 1.0e6
# Token-level two-way splits scored exactly (the best of the estimate).
TOKEN_TOP = 4


def _token_cost(owner, pairs, needs, P):
    """The slower rank's estimated cost (REMOTE_*) of a plan in 1-token chunks."""
    remote = _remote_tiles(needs, owner, P)
    load = np.bincount(owner, weights=pairs, minlength=P)
    cost = (load + REMOTE_PAIR * remote[:, 1] + REMOTE_ROW * remote[:, 0]
            + REMOTE_PASS * (remote[:, 0] > 0))
    return float(cost.max())


def _token_segments(pairs, needs, P, limit):
    """The owner of each token of an interval mask cut at its documents' boundaries
    (``_cheap_cuts`` of the 1-token crossing counts): with two ranks and at most
    ``MAX_TWO_WAY_SEGMENTS`` segments, every subset of whole segments for rank 0 filled
    to S/2 tokens with the head or tail of one other segment, the cheapest by
    ``_token_cost`` among those whose heavier rank's pairs stay within ``limit``; else
    the greedy of ``_segments`` over the segments. None where the mask has no inner
    boundary to cut at, or no split holds the limit."""
    S = pairs.size
    m = S // P
    cross = _cut_costs(needs, S)
    bounds = _cheap_cuts(cross, S)
    k = bounds.size - 1
    if k < 2:
        return None
    if P != 2 or k > MAX_TWO_WAY_SEGMENTS:
        owner = _greedy_segments(bounds, pairs, cross, P, m)
        if np.bincount(owner, weights=pairs, minlength=P).max() > limit:
            return None
        return owner
    inc, choices = _two_way_choices(bounds, m)
    if choices is None:
        return None
    sub, seg, lo, hi = choices
    a, b = bounds[:-1], bounds[1:]
    cw = _prefix(pairs)
    total = cw[-1]
    pw = (inc @ (cw[b] - cw[a]))[sub] + cw[hi] - cw[lo]
    heavy = np.maximum(pw, total - pw)
    head = lo == a[seg]
    cut = np.where(head, hi, lo)
    # causal documents: the rows after the cut read the keys before it
    extra = REMOTE_PAIR * cross[cut] + REMOTE_ROW * (b[seg] - cut) + REMOTE_PASS
    reader = np.where(head, total - pw, pw)
    est = np.where(seg >= 0, np.maximum(heavy, reader + extra), heavy)
    return _two_way_best(bounds, inc, choices, est, heavy, limit, TOKEN_TOP,
                         lambda owner: _token_cost(owner, pairs, needs, 2))


def _cheap_cuts(cross, n):
    """The segment bounds: 0, the boundaries that are local minima of ``cross`` and at
    most half its mean, n."""
    inner = cross[1:n]
    c = np.arange(1, n)
    cheap = ((inner <= cross[:n - 1]) & (inner <= cross[2:n + 1])
             & (inner <= 0.5 * inner.mean()))
    return np.concatenate(([0], c[cheap], [n]))


def _segments(work, cross, P, m, tiles=None, needs=None, limit=None):
    """Owner of each chunk: the sequence cut at the boundaries that are local minima
    of ``cross`` and at most half its mean (document boundaries). Two ranks and few
    segments (``tiles``, ``needs``, ``limit`` given): where the greedy below misses the
    ``limit``, the split of ``_two_way``. (Choosing it by ``_time_cost`` alone was
    slower on the GPU: 2xH200, 64k tokens in 12 documents, 8.67 ms a step against the
    greedy's 8.53, where the model predicted 4.5% faster.) The greedy: whole segments to the least loaded rank with room
    (heaviest first), then the leftovers into the remaining room: the rank with the
    most room takes a whole leftover that fits, else the head or tail piece whose cut
    crosses the fewest pairs."""
    n = work.size
    if n < 2:
        return np.repeat(np.arange(P), m)
    bounds = _cheap_cuts(cross, n)
    owner = _greedy_segments(bounds, work, cross, P, m)
    if P == 2 and tiles is not None and bounds.size - 1 <= MAX_TWO_WAY_SEGMENTS:
        split = _two_way(bounds, work, tiles, cross, needs, m, limit)
        if split is not None and np.bincount(owner, weights=work, minlength=P).max() > limit:
            return split
    return owner


def _greedy_segments(bounds, work, cross, P, m):
    """``_segments``' greedy over the segments between ``bounds``."""
    n = work.size
    cum = np.concatenate(([0.0], np.cumsum(work)))
    segs = sorted(zip(bounds[:-1].tolist(), bounds[1:].tolist()),
                  key=lambda s: (-(cum[s[1]] - cum[s[0]]), s[0]))
    owner = np.full(n, -1, dtype=np.int64)
    loads = np.zeros(P)
    room = np.full(P, m, dtype=np.int64)

    def give(r, a, b):
        owner[a:b] = r
        loads[r] += cum[b] - cum[a]
        room[r] -= b - a

    left = []
    for a, b in segs:
        fits = np.flatnonzero(room >= b - a)
        if fits.size:
            give(int(fits[np.argmin(loads[fits])]), a, b)
        else:
            left.append((a, b))
    while left:
        r = int(np.argmax(room))
        k = int(room[r])
        best = None
        for i, (a, b) in enumerate(left):
            if b - a <= k:
                key, piece = (0.0, a - b, a), (a, b)
            else:
                head, tail = cross[a + k], cross[b - k]
                key = (min(head, tail), 0, a)
                piece = (a, a + k) if head <= tail else (b - k, b)
            if best is None or key < best[0]:
                best = (key, i, piece)
        _, i, (pa, pb) = best
        a, b = left.pop(i)
        give(r, pa, pb)
        if pa > a:
            left.append((a, pa))
        if pb < b:
            left.append((pb, b))
    return owner


def _zigzag(n, P):
    m = n // P
    if m % 2 == 0:
        seg = np.repeat(np.arange(2 * P), m // 2)
        return np.where(seg < P, seg, 2 * P - 1 - seg)
    pos = np.arange(n) % (2 * P)                       # chunk-level zigzag
    owner = np.where(pos < P, pos, 2 * P - 1 - pos)
    return _fix_counts(owner, P, m)


def _fix_counts(owner, P, m):
    """Moves the last chunks of over-full ranks to under-full ones (equal counts)."""
    owner = owner.copy()
    counts = np.bincount(owner, minlength=P)
    for r in np.flatnonzero(counts > m):
        extra = np.flatnonzero(owner == r)[m:]
        for c in extra:
            t = int(np.flatnonzero(np.bincount(owner, minlength=P) < m)[0])
            owner[c] = t
    return owner


def _greedy(work, P, m):
    """LPT with a capacity of m chunks per rank."""
    order = np.argsort(-work, kind="stable")
    owner = np.empty(work.size, dtype=np.int64)
    loads = np.zeros(P)
    counts = np.zeros(P, dtype=np.int64)
    full = np.inf
    for c in order:
        r = int(np.argmin(loads))
        owner[c] = r
        counts[r] += 1
        loads[r] += work[c]
        if counts[r] == m:
            loads[r] = full
    return owner


def _refine(owner, work, P, target, max_swaps):
    """Swaps one chunk of the most loaded rank with one of the least loaded (the pair
    whose difference is closest to half the gap) while that lowers the maximum."""
    owner = owner.copy()
    loads = np.bincount(owner, weights=work, minlength=P)
    for _ in range(max_swaps):
        hi, lo = int(np.argmax(loads)), int(np.argmin(loads))
        gap = loads[hi] - loads[lo]
        if hi == lo or loads[hi] <= target or gap <= 0:
            break
        a = np.flatnonzero(owner == hi)
        b = np.flatnonzero(owner == lo)
        # Bulk step: the heaviest of hi against the lightest of lo, pair by pair, as many
        # pairs as fit in half the gap (then the fine single swap below).
        ad = a[np.argsort(-work[a], kind="stable")]
        ba = b[np.argsort(work[b], kind="stable")]
        diff = work[ad] - work[ba]
        moved = np.cumsum(diff)
        k = int(np.searchsorted(moved, gap / 2, side="right"))
        k = min(k, int(np.searchsorted(-diff, 0, side="left")))   # only positive pairs
        if k >= 2:
            owner[ad[:k]], owner[ba[:k]] = lo, hi
            loads[hi] -= moved[k - 1]
            loads[lo] += moved[k - 1]
            continue
        wb_order = np.argsort(work[b], kind="stable")
        wb = work[b][wb_order]
        # for each a: the b with work[a] - work[b] closest to gap / 2
        want = work[a] - gap / 2
        j = np.clip(np.searchsorted(wb, want), 0, wb.size - 1)
        j2 = np.clip(j - 1, 0, wb.size - 1)
        d1 = work[a] - wb[j]
        d2 = work[a] - wb[j2]
        pick2 = np.abs(d2 - gap / 2) < np.abs(d1 - gap / 2)
        jj = np.where(pick2, j2, j)
        d = np.where(pick2, d2, d1)
        new_max = np.maximum(loads[hi] - d, loads[lo] + d)
        i = int(np.argmin(new_max))
        if not (d[i] > 0 and new_max[i] < loads[hi]):
            break
        ca, cb = a[i], b[wb_order[jj[i]]]
        owner[ca], owner[cb] = lo, hi
        loads[hi] -= d[i]
        loads[lo] += d[i]
    return owner


def plan(mask, world_size, chunk=128, *, tolerance=0.1, balance="pairs", strategies=None,
         max_swaps=None, token_cuts=True):
    """Plans context parallelism of ``mask`` (a description from
    ``fragmask.distributed``: ``Intervals``, ``BlockLists``, ``TopK``, ``DenseRows``)
    over ``world_size`` ranks in chunks of ``chunk`` tokens (a multiple of the
    attention tile's 128 rows, or 64 for 64-token tiles; S must be a multiple of
    ``chunk * world_size``: pad the sequence).

    Every rank gets S/P tokens; the plan aims for every rank's visible pairs within
    ``tolerance`` of the mean (``plan.imbalance`` says what it reached: one chunk
    heavier than the bound allows, or too few chunks per rank, can make it
    unreachable) and, among the candidates that reach it, moves the fewest K/V chunks.
    ``balance="tiles"`` balances nonempty (query chunk, key chunk) tiles instead, what
    the kernels spend their time on (a partial tile costs a full one); ``plan.work``
    stays the visible pairs. Deterministic: every rank computes the same plan from the
    same description.

    ``token_cuts`` (interval masks with document boundaries, balancing pairs, with the
    ``segments`` start): also plans in 1-token chunks, documents cut at their own
    boundaries rather than the chunks', and takes that plan where its estimated time
    (``_token_cost``: the slower rank's pairs plus what its remote reads cost) is lower;
    ``plan.chunk`` is then 1 and ``plan.strategy`` ``"segments, token cuts"``."""
    P = int(world_size)
    chunk = int(chunk)
    if P < 1:
        raise ValueError("world_size must be at least 1")
    if chunk < 1 or chunk % 64:
        raise ValueError(f"chunk={chunk} must be a positive multiple of 64 tokens")
    S = int(mask.seqlen)
    if S % (chunk * P):
        raise ValueError(f"the sequence of {S} tokens is not a multiple of chunk x "
                         f"world_size = {chunk * P}: pad it")
    n = S // chunk
    m = n // P
    if balance not in ("pairs", "tiles"):
        raise ValueError(f"balance must be 'pairs' or 'tiles', not {balance!r}")
    pairs = np.asarray(mask.chunk_work(chunk), dtype=np.float64)
    work = pairs if balance == "pairs" else np.asarray(mask.chunk_tiles(chunk), np.float64)
    mean = work.sum() / P
    target = mean * (1 + tolerance / 4)      # aim below the bound: slack for timing
    if max_swaps is None:
        max_swaps = 4 * n
    starts = {
        "zigzag": lambda: _zigzag(n, P),
        "contiguous": lambda: np.repeat(np.arange(P), m),
        "greedy": lambda: _greedy(work, P, m),
    }
    names = list(starts) + ["segments"] if strategies is None else list(strategies)
    unknown = set(names) - set(starts) - {"segments"}
    if unknown or not names:
        raise ValueError(f"strategies must be among zigzag, contiguous, greedy, "
                         f"segments, not {sorted(unknown) or names}")
    needs = mask.chunk_needs(chunk)
    cross = _cut_costs(needs, n) if "segments" in names else None
    if cross is not None:
        tiles = np.asarray(mask.chunk_tiles(chunk), np.float64)
        starts["segments"] = lambda: _segments(work, cross, P, m, tiles, needs, target)
    best = None
    for name in names:
        if name not in starts:
            continue                      # segments: interval masks only
        owner = _refine(starts[name](), work, P, target, max_swaps)
        loads = np.bincount(owner, weights=work, minlength=P)
        imb = loads.max() / mean - 1 if mean > 0 else 0.0
        need = _needed(needs, owner, P)
        traffic = int(need.sum() - sum(need[r, owner == r].sum() for r in range(P)))
        remote = int(_remote_tiles(needs, owner, P)[:, 1].sum())
        ok = imb <= tolerance
        key = (not ok, (remote, traffic) if ok else (imb, 0), names.index(name))
        if best is None or key < best[0]:
            best = (key, owner, name)
    if best is None:
        raise ValueError("the segments strategy needs an interval mask (Intervals)")
    if token_cuts and cross is not None and balance == "pairs" and chunk > 1:
        tok = _token_plan(mask, P, chunk, best[1], mean * (1 + tolerance / 4))
        if tok is not None:
            return tok
    p = Plan(mask, P, chunk, best[1], best[2], pairs, needs)
    p.balance = balance
    loads = np.bincount(best[1], weights=work, minlength=P)
    p.balanced_imbalance = float(loads.max() / mean - 1) if mean > 0 else 0.0
    return p


def _token_plan(mask, P, chunk, owner, limit):
    """The plan in 1-token chunks of ``_token_segments`` where its ``_token_cost`` is
    below that of ``owner`` (the chunk plan, each chunk's tokens), else None."""
    pairs = np.asarray(mask.chunk_work(1), dtype=np.float64)
    needs = mask.chunk_needs(1)
    tokens = _token_segments(pairs, needs, P, limit)
    if tokens is None:
        return None
    if _token_cost(tokens, pairs, needs, P) >= _token_cost(np.repeat(owner, chunk), pairs,
                                                            needs, P):
        return None
    p = Plan(mask, P, 1, tokens, "segments, token cuts", pairs, needs)
    p.balance = "pairs"
    p.balanced_imbalance = p.imbalance
    return p
