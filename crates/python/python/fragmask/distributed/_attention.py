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
    """One rank's share of a plan on one device: its mask rows packed against its keys
    (its own tokens, then the ones it receives: ``plan.kv_positions(rank)``), and the
    index tensors of the exchange. Built once per (plan, mask, rank, device, block)
    and cached on the plan."""

    def __init__(self, plan, mask, rank, device, block=(128, 128)):
        import torch

        self.plan, self.rank, self.device = plan, rank, device
        ex = exchange_indices(plan, rank)

        def idx(a):
            return torch.as_tensor(np.asarray(a, dtype=np.int64), device=device)

        self.send_idx, self.send_rows = idx(ex.send_idx), idx(ex.send_rows)
        self.send_inverse = idx(ex.send_inverse)
        self.send_splits, self.recv_splits = list(ex.send_splits), list(ex.recv_splits)
        self.local_len, self.kv_len = ex.local_len, ex.kv_len
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
        """(own-keys mask, received-keys mask) for the overlapped forward (None where a
        part has no key)."""
        if self._parts is None:
            own, recv = self.keys[:self.local_len], self.keys[self.local_len:]
            self._parts = (
                self._desc.local_mask(self.rows, own, self.device, self._block,
                                      partial=True),
                self._desc.local_mask(self.rows, recv, self.device, self._block,
                                      partial=True) if recv.size else None)
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


def _head_major(buf, B, H, D):
    """[S, B*H*D] -> a [B, H, S, D] view."""
    return buf.view(buf.shape[0], B, H, D).permute(1, 2, 0, 3)


def _send_receive(k, v, prep, group, async_op=False):
    """The all-to-all of the listed K/V chunks (K and V in one token-major buffer):
    (receive buffer [T, B*Hk*(Dk+Dv)], work handle when async)."""
    import torch

    sel = prep.send_idx
    send = torch.cat([_tokens_major(k.index_select(2, sel)),
                      _tokens_major(v.index_select(2, sel))], dim=1)
    B, Hk = k.shape[:2]
    F = B * Hk * (k.shape[3] + v.shape[3])
    recv = k.new_empty((sum(prep.recv_splits), F))
    work = _dist().all_to_all_single(recv, send, prep.recv_splits, prep.send_splits,
                                     group=group, async_op=async_op)
    return recv, work


def _split_kv(buf, B, Hk, Dk, Dv):
    return (_head_major(buf[:, :B * Hk * Dk], B, Hk, Dk),
            _head_major(buf[:, B * Hk * Dk:], B, Hk, Dv))


def _exchange_fn():
    import torch

    class Exchange(torch.autograd.Function):
        """The rank's keys: its own K/V, then the received chunks (one concatenation).
        The backward returns each received key's gradient to its owner, which adds the
        returns to its own in fp32 (only the rows it sent are touched)."""

        @staticmethod
        def forward(ctx, k, v, prep, group):
            B, Hk, S, Dk = k.shape
            Dv = v.shape[3]
            recv, _ = _send_receive(k, v, prep, group)
            kr, vr = _split_kv(recv, B, Hk, Dk, Dv)
            ctx.prep, ctx.group, ctx.shape = prep, group, (B, Hk, S, Dk, Dv)
            return torch.cat([k, kr], dim=2), torch.cat([v, vr], dim=2)

        @staticmethod
        def backward(ctx, dkg, dvg):
            prep, group = ctx.prep, ctx.group
            B, Hk, S, Dk, Dv = ctx.shape
            like = dkg if dkg is not None else dvg
            if dkg is None:
                dkg = like.new_zeros((B, Hk, prep.kv_len, Dk))
            if dvg is None:
                dvg = like.new_zeros((B, Hk, prep.kv_len, Dv))
            grad = torch.cat([_tokens_major(dkg[:, :, S:]), _tokens_major(dvg[:, :, S:])],
                             dim=1)
            back = grad.new_empty((sum(prep.send_splits), grad.shape[1]))
            _dist().all_to_all_single(back, grad, prep.send_splits, prep.recv_splits,
                                      group=group)
            bk, bv = _split_kv(back, B, Hk, Dk, Dv)
            out = []
            for d, b in ((dkg, bk), (dvg, bv)):
                d = d[:, :, :S].contiguous()
                rows = d.index_select(2, prep.send_rows).float()
                rows.index_add_(2, prep.send_inverse, b.float())
                d.index_copy_(2, prep.send_rows, rows.to(d.dtype))
                out.append(d)
            return out[0], out[1], None, None

    return Exchange


_Exchange = None


def gather_kv(k, v, prep, group=None):
    """This rank's K/V ``[B, Hk, S_local, D]`` -> its keys ``[B, Hk, S_kv, D]`` in
    ``prep.keys`` order: its own tokens, then the received ones (differentiable: the
    backward returns dK/dV to the owners). Without traffic, k and v themselves."""
    global _Exchange
    if not prep.exchange:
        return k, v
    if _Exchange is None:
        _Exchange = _exchange_fn()
    return _Exchange.apply(k, v, prep, group)


def attention(q, k, v, plan, mask=None, group=None, *, scale=None, return_lse=False,
              layout="bhsd", block=(128, 128), overlap=False):
    """Masked attention of this rank's shard: ``q``, ``k``, ``v`` hold the rank's
    tokens in plan order (``plan.shard`` / ``plan.to_plan_order``), ``[B, H, S/P, D]``
    (``layout="bhsd"``) or ``[B, S/P, H, D]`` (``"bshd"``); k and v may have fewer
    heads (GQA). ``mask`` is the description the plan was made from (default
    ``plan.mask``). Returns this rank's output (and fp32 lse ``[B, H, S/P]`` with
    ``return_lse``), equal to the rows of single-GPU ``fragmask.attention`` over the
    whole sequence. Differentiable in q, k and v.

    Without autograd (inference) and with ``overlap=True``, the rank attends to its own
    keys while the others' arrive and merges the two partial states in fp32 (two
    attention calls and a merge: slower than one call in our measurements on two
    H100s, hence off by default)."""
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
    m_own, m_recv = prep.parts()
    work = recv = None
    if prep.exchange:
        recv, work = _send_receive(k, v, prep, group, async_op=True)
    o, lse = _fm_attention(q, k, v, m_own, scale=scale, return_lse=True)
    if work is None:
        return o, lse
    work.wait()
    if m_recv is None:
        return o, lse
    kr, vr = _split_kv(recv, k.shape[0], k.shape[1], k.shape[3], v.shape[3])
    o2, lse2 = _fm_attention(q, kr, vr, m_recv, scale=scale, return_lse=True)
    return merge_states([o, o2], [lse, lse2])
