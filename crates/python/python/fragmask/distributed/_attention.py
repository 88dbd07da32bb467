"""``fragmask.distributed.attention``: this rank's queries against the keys its mask
rows read, gathered from their owners with one ``all_to_all_single`` (only the chunks
the plan lists), one ``fragmask.attention`` over them, and the reverse exchange of
dK/dV in the backward (docs/distributed.md)."""

import numpy as np

from ._exchange import exchange_indices
from ._merge import merge_states


def _fm_attention(*args, **kwargs):
    from .. import attention as fm_attention   # the public op

    return fm_attention(*args, **kwargs)


def _dist():
    import torch.distributed as dist

    return dist


def _rank_of(group):
    dist = _dist()
    if not dist.is_available() or not dist.is_initialized():
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


class Prepared:
    """One rank's share of a plan on one device: its mask rows packed against the keys
    it reads, and the index tensors of the exchange. Built once per (plan, mask, rank,
    device, block) and cached on the plan."""

    def __init__(self, plan, mask, rank, device, block=(128, 128)):
        import torch

        self.plan, self.rank, self.device = plan, rank, device
        ex = exchange_indices(plan, rank)

        def idx(a):
            return torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)

        self.send_idx, self.recv_dst = idx(ex.send_idx), idx(ex.recv_dst)
        self.own_src, self.own_dst = idx(ex.own_src), idx(ex.own_dst)
        self.send_splits, self.recv_splits = list(ex.send_splits), list(ex.recv_splits)
        self.kv_len = ex.kv_len
        # Whether any rank sends anything: the same on every rank, so all of them enter
        # the collective or none does.
        self.exchange = plan.traffic() > 0
        self.rows = plan.positions(rank)
        self.keys = plan.kv_positions(rank)
        self.mask = mask.local_mask(self.rows, self.keys, device, block=block)
        self.heads = mask.heads
        self._parts = None
        self._block = block
        self._desc = mask

    def parts(self):
        """(own-keys mask, received-keys mask, the received keys' order) for the
        overlapped forward: keys this rank owns, then the received ones."""
        if self._parts is None:
            import torch

            C = self.plan.chunk
            kv = self.plan.kv_chunks[self.rank]
            own = kv[self.plan.owner[kv] == self.rank]
            recv = np.concatenate([self.plan.recv_chunks[self.rank][s]
                                   for s in range(self.plan.world_size)])
            order = np.argsort(recv, kind="stable")
            pos = lambda c: (c[:, None] * C + np.arange(C)[None, :]).reshape(-1)  # noqa: E731
            m_own = (self._desc.local_mask(self.rows, pos(own), self.device, self._block)
                     if own.size else None)
            m_recv = (self._desc.local_mask(self.rows, pos(recv[order]), self.device,
                                            self._block) if recv.size else None)
            tok_order = (order[:, None] * C + np.arange(C)[None, :]).reshape(-1)
            self._parts = (m_own, m_recv,
                           torch.as_tensor(tok_order, dtype=torch.int64, device=self.device))
        return self._parts


def prepare(plan, mask=None, *, group=None, rank=None, device=None, block=(128, 128)):
    """The rank's ``Prepared`` share (cached on the plan): call it once per mask, e.g.
    at the start of a step, so the first layer's attention does not pack the mask."""
    import torch

    mask = plan.mask if mask is None else mask
    if rank is None:
        rank, size = _rank_of(group)
        if size != plan.world_size:
            raise ValueError(f"the plan is for {plan.world_size} ranks, the group has {size}")
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device())
    device = torch.device(device)
    cache = plan.__dict__.setdefault("_prepared", {})
    key = (id(mask), rank, str(device), tuple(block))
    hit = cache.get(key)
    if hit is None or hit[0] is not mask:
        if mask is not plan.mask:
            _check_compatible(plan, mask)
        hit = cache[key] = (mask, Prepared(plan, mask, rank, device, block))
    return hit[1]


def _check_compatible(plan, mask):
    from ._plan import _needed

    if mask.seqlen != plan.seqlen:
        raise ValueError(f"the mask has {mask.seqlen} tokens, the plan {plan.seqlen}")
    need = _needed(mask.chunk_needs(plan.chunk), plan.owner, plan.world_size)
    for r in range(plan.world_size):
        if np.setdiff1d(np.flatnonzero(need[r]), plan.kv_chunks[r]).size:
            raise ValueError("the mask reads key chunks the plan does not send: plan it "
                             "with fragmask.distributed.plan(mask, ...)")


def _tokens_major(t):
    """[B, H, S, D] -> [S, B*H*D] (a copy unless already token-major)."""
    B, H, S, D = t.shape
    return t.permute(2, 0, 1, 3).reshape(S, B * H * D)


def _exchange_fn():
    import torch

    class Exchange(torch.autograd.Function):
        """Gathers the K/V tokens this rank reads (own and received) in key order;
        the backward sends each received token's gradient back to its owner and adds
        it there (fp32)."""

        @staticmethod
        def forward(ctx, k, v, prep, group):
            B, Hk, S, Dk = k.shape
            Dv = v.shape[3]
            buf = torch.cat([_tokens_major(k), _tokens_major(v)], dim=1)
            F = buf.shape[1]
            out = buf.new_empty((prep.kv_len, F))
            out.index_copy_(0, prep.own_dst, buf.index_select(0, prep.own_src))
            if prep.exchange:
                recv = buf.new_empty((sum(prep.recv_splits), F))
                _dist().all_to_all_single(recv, buf.index_select(0, prep.send_idx),
                                          prep.recv_splits, prep.send_splits, group=group)
                out.index_copy_(0, prep.recv_dst, recv)
            ctx.prep, ctx.group, ctx.shape = prep, group, (B, Hk, S, Dk, Dv)
            kg = out[:, :B * Hk * Dk].view(prep.kv_len, B, Hk, Dk).permute(1, 2, 0, 3)
            vg = out[:, B * Hk * Dk:].view(prep.kv_len, B, Hk, Dv).permute(1, 2, 0, 3)
            return kg, vg

        @staticmethod
        def backward(ctx, dkg, dvg):
            prep, group = ctx.prep, ctx.group
            B, Hk, S, Dk, Dv = ctx.shape
            dtype = dkg.dtype if dkg is not None else dvg.dtype
            parts = []
            for g, D in ((dkg, Dk), (dvg, Dv)):
                if g is None:
                    g = torch.zeros((B, Hk, prep.kv_len, D), dtype=dtype, device=prep.device)
                parts.append(_tokens_major(g))
            grad = torch.cat(parts, dim=1)
            F = grad.shape[1]
            acc = torch.zeros((S, F), dtype=torch.float32, device=grad.device)
            acc.index_add_(0, prep.own_src, grad.index_select(0, prep.own_dst).float())
            if prep.exchange:
                back = grad.new_empty((sum(prep.send_splits), F))
                _dist().all_to_all_single(back, grad.index_select(0, prep.recv_dst),
                                          prep.send_splits, prep.recv_splits, group=group)
                acc.index_add_(0, prep.send_idx, back.float())
            acc = acc.to(dtype)
            dk = acc[:, :B * Hk * Dk].view(S, B, Hk, Dk).permute(1, 2, 0, 3)
            dv = acc[:, B * Hk * Dk:].view(S, B, Hk, Dv).permute(1, 2, 0, 3)
            return dk, dv, None, None

    return Exchange


_Exchange = None


def gather_kv(k, v, prep, group=None):
    """This rank's K/V ``[B, Hk, S_local, D]`` -> the keys it reads ``[B, Hk, S_kv, D]``
    in ``prep.keys`` order (differentiable: the backward returns dK/dV to the owners)."""
    global _Exchange
    if _Exchange is None:
        _Exchange = _exchange_fn()
    return _Exchange.apply(k, v, prep, group)


def attention(q, k, v, plan, mask=None, group=None, *, scale=None, return_lse=False,
              layout="bhsd", block=(128, 128), overlap=True):
    """Masked attention of this rank's shard: ``q``, ``k``, ``v`` hold the rank's
    tokens in plan order (``plan.shard`` / ``plan.to_plan_order``), ``[B, H, S/P, D]``
    (``layout="bhsd"``) or ``[B, S/P, H, D]`` (``"bshd"``); k and v may have fewer
    heads (GQA). ``mask`` is the description the plan was made from (default
    ``plan.mask``). Returns this rank's output (and fp32 lse ``[B, H, S/P]`` with
    ``return_lse``), equal to the rows of single-GPU ``fragmask.attention`` over the
    whole sequence. Differentiable in q, k and v.

    Without autograd (inference) and with ``overlap=True``, the rank attends to its own
    keys while the others' arrive and merges the two partial states in fp32."""
    import torch

    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    elif layout != "bhsd":
        raise ValueError(f"layout must be 'bhsd' or 'bshd', not {layout!r}")
    S_local = plan.local_seqlen
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4 or t.shape[2] != S_local:
            raise ValueError(f"fragmask.distributed.attention: {name} is "
                             f"{tuple(t.shape)}; expected [B, H, {S_local}, D] (this "
                             "rank's shard of the plan)")
    prep = prepare(plan, mask, group=group, device=q.device, block=block)
    if prep.heads not in (1, q.shape[1]):
        raise ValueError(f"the mask has {prep.heads} heads, q has {q.shape[1]}")
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if overlap and not grad and plan.world_size > 1:
        o, lse = _forward_overlapped(q, k, v, prep, group, scale)
    else:
        kg, vg = gather_kv(k, v, prep, group)
        o, lse = _fm_attention(q, kg, vg, prep.mask, scale=scale, return_lse=True)
    if layout == "bshd":
        o = o.transpose(1, 2)
    return (o, lse) if return_lse else o


def _forward_overlapped(q, k, v, prep, group, scale):
    """Own keys while the all-to-all runs (NCCL's stream), then the received keys, then
    the fp32 merge."""
    import torch

    m_own, m_recv, recv_order = prep.parts()
    B, Hk, S, Dk = k.shape
    Dv = v.shape[3]
    plan, C = prep.plan, prep.plan.chunk
    work = recv = None
    if prep.exchange:
        buf = torch.cat([_tokens_major(k), _tokens_major(v)], dim=1)
        recv = buf.new_empty((sum(prep.recv_splits), buf.shape[1]))
        work = _dist().all_to_all_single(recv, buf.index_select(0, prep.send_idx),
                                         prep.recv_splits, prep.send_splits, group=group,
                                         async_op=True)
    outs, lses = [], []
    if m_own is not None:
        kv = plan.kv_chunks[prep.rank]
        own = kv[plan.owner[kv] == prep.rank]
        sel = torch.as_tensor((np.searchsorted(plan.chunks[prep.rank], own)[:, None] * C
                               + np.arange(C)[None, :]).reshape(-1), device=q.device)
        o, lse = _fm_attention(q, k.index_select(2, sel), v.index_select(2, sel), m_own,
                                scale=scale, return_lse=True)
        outs.append(o)
        lses.append(lse)
    if work is not None:
        work.wait()
        recv = recv.index_select(0, recv_order)
        T = recv.shape[0]
        kr = recv[:, :B * Hk * Dk].view(T, B, Hk, Dk).permute(1, 2, 0, 3)
        vr = recv[:, B * Hk * Dk:].view(T, B, Hk, Dv).permute(1, 2, 0, 3)
        if m_recv is not None:
            o, lse = _fm_attention(q, kr, vr, m_recv, scale=scale, return_lse=True)
            outs.append(o)
            lses.append(lse)
    if not outs:
        B, H, S, D = q.shape[0], q.shape[1], q.shape[2], v.shape[3]
        return (q.new_zeros((B, H, S, D)),
                torch.full((B, H, S), float("-inf"), device=q.device))
    if len(outs) == 1:
        return outs[0], lses[0]
    return merge_states(outs, lses)
