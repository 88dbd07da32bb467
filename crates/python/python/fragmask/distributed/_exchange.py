"""The K/V exchange of one rank as index arrays (numpy): what it sends to each rank,
what it receives, and where each token lands in its key order. Pure functions of the
plan, so the CPU tests replay the whole exchange without torch or a GPU."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ExchangeIndices:
    """Token indices of one rank's exchange (int64). The rank's key order is its own
    tokens, then the received ones (``plan.kv_positions``).

    ``send_idx``: local tokens to send, destination-major (rank order), with
    ``send_splits[d]`` tokens for rank d; ``send_rows`` / ``send_inverse``: its distinct
    tokens and each entry's place among them (where returned gradients add up).
    ``recv_splits[s]``: tokens received from rank s (the receive buffer is
    source-major). ``local_len`` + ``sum(recv_splits)`` = ``kv_len``."""

    send_idx: np.ndarray
    send_splits: tuple
    send_rows: np.ndarray
    send_inverse: np.ndarray
    recv_splits: tuple
    local_len: int
    kv_len: int


def _tokens(chunk_pos, C):
    chunk_pos = np.asarray(chunk_pos, dtype=np.int64)
    return (chunk_pos[:, None] * C + np.arange(C, dtype=np.int64)[None, :]).reshape(-1)


def exchange_indices(plan, rank):
    P, C = plan.world_size, plan.chunk
    mine = plan.chunks[rank]
    send = [np.searchsorted(mine, plan.send_chunks[rank][d]) for d in range(P)]
    send_idx = _tokens(np.concatenate(send), C)
    rows, inverse = np.unique(send_idx, return_inverse=True)
    recv_splits = tuple(len(plan.recv_chunks[rank][s]) * C for s in range(P))
    S = plan.local_seqlen
    return ExchangeIndices(
        send_idx=send_idx,
        send_splits=tuple(len(s) * C for s in send),
        send_rows=rows.astype(np.int64),
        send_inverse=inverse.reshape(-1).astype(np.int64),
        recv_splits=recv_splits,
        local_len=S,
        kv_len=S + sum(recv_splits),
    )


def simulate_gather(plan, shards):
    """Replays every rank's exchange on host arrays: ``shards[r]`` is rank r's
    ``[S/P, ...]`` token-major array; returns each rank's keys ``[kv_len, ...]`` in its
    key order (what ``gather_kv`` gives on the GPUs)."""
    P = plan.world_size
    ex = [exchange_indices(plan, r) for r in range(P)]
    pieces = []   # pieces[s][d]: what s sends to d
    for s in range(P):
        buf = shards[s][ex[s].send_idx]
        cuts = np.cumsum((0,) + ex[s].send_splits)
        pieces.append([buf[cuts[d]:cuts[d + 1]] for d in range(P)])
    return [np.concatenate([shards[r]] + [pieces[s][r] for s in range(P)])
            for r in range(P)]


def simulate_scatter_grad(plan, grads):
    """The backward's reverse exchange on host arrays: ``grads[r]`` ``[kv_len, ...]``
    (gradients of rank r's keys) -> each rank's ``[S/P, ...]`` gradient of its own
    keys, summed over every rank that read them."""
    P = plan.world_size
    ex = [exchange_indices(plan, r) for r in range(P)]
    back = []     # back[r][s]: gradients r returns to s
    for r in range(P):
        g = grads[r][ex[r].local_len:]
        cuts = np.cumsum((0,) + ex[r].recv_splits)
        back.append([g[cuts[s]:cuts[s + 1]] for s in range(P)])
    out = []
    for s in range(P):
        acc = np.array(grads[s][:ex[s].local_len], dtype=np.float64)
        returned = np.concatenate([back[d][s] for d in range(P)])
        rows = np.zeros((ex[s].send_rows.size,) + acc.shape[1:])
        np.add.at(rows, ex[s].send_inverse, returned)
        acc[ex[s].send_rows] += rows
        out.append(acc)
    return out


# The overlapped schedule -----------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One step of a rank's overlapped exchange (docs/distributed.md, "How a call
    runs"). At step ``distance`` = s (1 ..= P-1) rank r receives the key chunks it reads
    from ``src`` = (r - s) mod P and sends the chunks ``dst`` = (r + s) mod P reads, so
    every send of a step meets its receive at the same step of the peer.

    ``recv_chunks``: the key chunks from ``src`` (ascending; ``recv_len`` tokens);
    ``send_local``: the rank's local token indices sent to ``dst`` (its chunks,
    ascending); ``rows``: the rank's local query tokens whose rows read any of
    ``recv_chunks`` (ascending: the only rows the step's attention and merge touch);
    ``row_runs``: ``rows`` as (start, end) runs of consecutive tokens."""

    distance: int
    src: int
    dst: int
    recv_chunks: np.ndarray
    recv_len: int
    send_local: np.ndarray
    rows: np.ndarray
    row_runs: tuple


def _reads(needs, q_chunks, k_chunks):
    """bool per query chunk of ``q_chunks``: does it read any key chunk of ``k_chunks``
    (ascending)? ``needs`` is a description's ``chunk_needs``."""
    kind, *data = needs
    q_chunks = np.asarray(q_chunks, dtype=np.int64)
    if k_chunks.size == 0:
        return np.zeros(q_chunks.size, dtype=bool)
    if kind == "ranges":
        first, last = data
        lo = np.searchsorted(k_chunks, first[q_chunks], side="left")
        hi = np.searchsorted(k_chunks, last[q_chunks], side="right")
        return hi > lo
    (matrix,) = data
    return matrix[np.ix_(q_chunks, k_chunks)].any(1)


def _runs(idx):
    if idx.size == 0:
        return ()
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [idx.size]))
    return tuple((int(idx[a]), int(idx[b - 1]) + 1) for a, b in zip(starts, ends))


def schedule(plan, rank, needs=None):
    """The P-1 steps of rank ``rank``'s overlapped exchange, by distance (steps that
    move nothing either way are kept: both sides skip them alike). ``needs``: the
    ``chunk_needs`` of the mask the call runs (default the plan's)."""
    P, C = plan.world_size, plan.chunk
    needs = plan.chunk_needs if needs is None else needs
    mine = plan.chunks[rank]
    steps = []
    for s in range(1, P):
        src, dst = (rank - s) % P, (rank + s) % P
        recv = np.asarray(plan.recv_chunks[rank][src], dtype=np.int64)
        send = np.searchsorted(mine, plan.send_chunks[rank][dst])
        reading = np.flatnonzero(_reads(needs, mine, recv))
        rows = _tokens(reading, C)
        steps.append(Step(distance=s, src=src, dst=dst, recv_chunks=recv,
                          recv_len=int(recv.size * C), send_local=_tokens(send, C),
                          rows=rows, row_runs=_runs(rows)))
    return steps


def forward_events(n_steps):
    """The order in which a rank's overlapped forward posts, waits for and computes:
    ``("post", i)`` starts step i's transfer (side stream), ``("own",)`` attends to the
    rank's own keys, ``("wait", i)`` makes the compute stream wait for step i,
    ``("compute", i)`` attends to step i's keys and merges. Step 0 is posted before the
    own keys' attention; step i+1 right after step i lands, before step i is computed:
    one step in flight while one is computed (double buffering, a step ahead)."""
    events = []
    if n_steps:
        events.append(("post", 0))
    events.append(("own",))
    for i in range(n_steps):
        events.append(("wait", i))
        if i + 1 < n_steps:
            events.append(("post", i + 1))
        events.append(("compute", i))
    return events


def backward_events(n_steps):
    """The backward's order: each step's gradients first (``("compute", i)``), their
    dK/dV posted back to the owner at once (``("post", i)``, overlapping the next
    step's and the own keys' backward), then ``("own",)``, then ``("wait", i)`` for
    the returned gradients of every step, added to the rank's own in fp32."""
    events = []
    for i in range(n_steps):
        events += [("compute", i), ("post", i)]
    events.append(("own",))
    events += [("wait", i) for i in range(n_steps)]
    return events


def simulate_steps(plan, shards):
    """Replays every rank's schedule on host arrays: for each rank, the list (one per
    step) of the ``[recv_len, ...]`` keys it receives, in ``recv_chunks`` order."""
    P = plan.world_size
    sched = [schedule(plan, r) for r in range(P)]
    got = []
    for r in range(P):
        mine = []
        for st in sched[r]:
            peer = sched[st.src][st.distance - 1]
            if peer.dst != r:
                raise RuntimeError("unmatched step: the schedules disagree")
            mine.append(shards[st.src][peer.send_local])
        got.append(mine)
    return got
