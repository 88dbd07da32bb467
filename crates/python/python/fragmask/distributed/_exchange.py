"""The K/V exchange of one rank as index arrays (numpy): what it sends to each rank,
what it receives, and where each token lands in its key order. Pure functions of the
plan, so the CPU tests replay the whole exchange without torch or a GPU."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ExchangeIndices:
    """Token indices of one rank's exchange (all int64).

    ``send_idx``: local tokens to send, destination-major (rank order), with
    ``send_splits[d]`` tokens for rank d. ``recv_splits[s]``: tokens received from rank
    s; the receive buffer is source-major. ``recv_dst``: key position of each received
    token. ``own_src`` / ``own_dst``: local token and key position of the rank's own
    keys. ``kv_len``: keys in all (``plan.kv_positions(rank)``)."""

    send_idx: np.ndarray
    send_splits: tuple
    recv_splits: tuple
    recv_dst: np.ndarray
    own_src: np.ndarray
    own_dst: np.ndarray
    kv_len: int


def _tokens(chunk_pos, C):
    chunk_pos = np.asarray(chunk_pos, dtype=np.int64)
    return (chunk_pos[:, None] * C + np.arange(C, dtype=np.int64)[None, :]).reshape(-1)


def exchange_indices(plan, rank):
    P, C = plan.world_size, plan.chunk
    mine = plan.chunks[rank]
    kv = plan.kv_chunks[rank]
    send = [np.searchsorted(mine, plan.send_chunks[rank][d]) for d in range(P)]
    recv = [plan.recv_chunks[rank][s] for s in range(P)]
    recv_all = np.concatenate(recv)
    own = kv[plan.owner[kv] == rank]
    return ExchangeIndices(
        send_idx=_tokens(np.concatenate(send), C),
        send_splits=tuple(len(s) * C for s in send),
        recv_splits=tuple(len(c) * C for c in recv),
        recv_dst=_tokens(np.searchsorted(kv, recv_all), C),
        own_src=_tokens(np.searchsorted(mine, own), C),
        own_dst=_tokens(np.searchsorted(kv, own), C),
        kv_len=len(kv) * C,
    )


def simulate_gather(plan, shards):
    """Replays every rank's exchange on host arrays: ``shards[r]`` is rank r's
    ``[S/P, ...]`` token-major array; returns each rank's gathered keys ``[kv_len,
    ...]`` (what ``gather_kv`` gives on the GPUs)."""
    P = plan.world_size
    ex = [exchange_indices(plan, r) for r in range(P)]
    pieces = []   # pieces[s][d]: what s sends to d
    for s in range(P):
        buf = shards[s][ex[s].send_idx]
        cuts = np.cumsum((0,) + ex[s].send_splits)
        pieces.append([buf[cuts[d]:cuts[d + 1]] for d in range(P)])
    out = []
    for r in range(P):
        recv = np.concatenate([pieces[s][r] for s in range(P)])
        g = np.zeros((ex[r].kv_len,) + shards[r].shape[1:], dtype=shards[r].dtype)
        g[ex[r].own_dst] = shards[r][ex[r].own_src]
        g[ex[r].recv_dst] = recv
        out.append(g)
    return out


def simulate_scatter_grad(plan, grads):
    """The backward's reverse exchange on host arrays: ``grads[r]`` ``[kv_len, ...]``
    (gradients of rank r's gathered keys) -> each rank's ``[S/P, ...]`` gradient of its
    own keys, summed over every rank that read them."""
    P = plan.world_size
    ex = [exchange_indices(plan, r) for r in range(P)]
    back = []     # back[r][s]: gradients r returns to s
    for r in range(P):
        g = grads[r][ex[r].recv_dst]
        cuts = np.cumsum((0,) + ex[r].recv_splits)
        back.append([g[cuts[s]:cuts[s + 1]] for s in range(P)])
    out = []
    S = plan.local_seqlen
    for s in range(P):
        acc = np.zeros((S,) + grads[s].shape[1:], dtype=np.float64)
        np.add.at(acc, ex[s].own_src, grads[s][ex[s].own_dst])
        np.add.at(acc, ex[s].send_idx, np.concatenate([back[d][s] for d in range(P)]))
        out.append(acc)
    return out
