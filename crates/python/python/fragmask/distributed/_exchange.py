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
