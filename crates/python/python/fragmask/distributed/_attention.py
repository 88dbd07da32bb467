"""``fragmask.distributed.attention``: this rank's queries against the keys its mask
rows read. The default (overlapped) path attends to the rank's own keys while the
others' K/V chunks arrive over NCCL point-to-point on a side stream, then to each
step's chunks as they land, merging the partial (o, lse) in fp32; its backward gets
the merged (o, lse), computes each step's gradients first and sends their dK/dV back
to the owners while it computes its own keys' (docs/distributed.md). The one-call path
(``overlap=False``) gathers every chunk with one ``all_to_all_single`` first."""

import numpy as np

from ._exchange import backward_events, exchange_indices, forward_events, schedule


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
    """One rank's share of a plan on one device: its exchange (index tensors of the
    one-call path, the steps of the overlapped one) and its mask rows packed against
    its keys: against its own tokens (``own_mask``) and, per step, the rows that read
    the step's chunks against those chunks (``step_masks``); the one-call path's
    ``mask`` (rows against ``plan.kv_positions(rank)``) is packed when first used.
    Built once per (plan, mask, rank, device, block) and cached on the plan."""

    def __init__(self, plan, mask, rank, device, block=(128, 128), group=None):
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
        self.heads = mask.heads
        self._block = block
        self._desc = mask
        self._mask = None
        # The overlapped path: own keys, then one part per step that moves anything.
        self.own_mask = self._pack(self.rows, self.rows)
        # How each part's call is made (``_Part``): the own keys as plain causal
        # attention where they are one causal document, a step's keys without a mask
        # where its rows see all of them.
        self.own_part = _Part(self.own_mask, causal=_one_causal_document(mask, self.rows),
                              full=_sees_all(mask, self.rows, self.rows))
        needs = None if mask is plan.mask else mask.chunk_needs(plan.chunk)
        self.steps = [st for st in schedule(plan, rank, needs)
                      if st.recv_len or st.send_local.size] if self.exchange else []
        self.step_rows, self.step_masks, self.step_parts, self.step_send = [], [], [], []
        C = plan.chunk
        for st in self.steps:
            keys = (st.recv_chunks[:, None] * C + np.arange(C)[None, :]).reshape(-1)
            if st.recv_len and st.rows.size:
                self.step_rows.append(_row_selector(st, self.local_len, idx))
                self.step_masks.append(self._pack(self.rows[st.rows], keys))
                self.step_parts.append(_Part(self.step_masks[-1],
                                             full=_sees_all(mask, self.rows[st.rows], keys)))
            else:
                self.step_rows.append(None)
                self.step_masks.append(None)
                self.step_parts.append(None)
            self.step_send.append(_token_selector(st.send_local, idx)
                                  if st.send_local.size else None)
        self.step_send_idx = [idx(st.send_local) for st in self.steps]
        # The staged backward (``STAGED_BACKWARD``): how each step's part sits in the own
        # part's rows (``_staged_rows``), packed lazily for a part over all rows.
        self.step_staged = [_staged_rows(sel, self.local_len)
                            if self.step_parts[i] is not None else None
                            for i, sel in enumerate(self.step_rows)]
        self._step_all_rows = {}
        # The same selections as runs of consecutive local tokens with their offsets in
        # the step's buffer ((start, end, offset)): few runs add by slices, many by
        # index_add_ (_add_runs).
        self.step_row_runs = [_with_offsets(st.row_runs) for st in self.steps]
        self.step_send_runs = [_with_offsets(_runs_of(st.send_local)) for st in self.steps]
        # Global ranks of the steps' peers (P2P ops name global ranks).
        self.peer_src = [_global_rank(group, st.src) for st in self.steps]
        self.peer_dst = [_global_rank(group, st.dst) for st in self.steps]

    def all_rows_part(self, i):
        """Step i's keys against all the rank's rows (rows that read none of them have
        empty lists): the staged backward's part where the step's rows are not one
        aligned run (packed when first used)."""
        part = self._step_all_rows.get(i)
        if part is None:
            st, C = self.steps[i], self.plan.chunk
            keys = (st.recv_chunks[:, None] * C + np.arange(C)[None, :]).reshape(-1)
            part = self._step_all_rows[i] = _Part(
                self._pack(self.rows, keys),
                full=_sees_all(self._desc, self.rows, keys))
        return part

    def _pack(self, rows, keys):
        if self.device.type == "cpu":
            return self._desc.local_mask_cpu(rows, keys, self._block, partial=True)
        return self._desc.local_mask(rows, keys, self.device, self._block, partial=True)

    @property
    def mask(self):
        """The rank's rows against all its keys (the one-call path)."""
        if self._mask is None:
            if self.device.type == "cpu":
                self._mask = self._desc.local_mask_cpu(self.rows, self.keys, self._block)
            else:
                self._mask = self._desc.local_mask(self.rows, self.keys, self.device,
                                                   block=self._block)
        return self._mask


# Parts whose mask is plain causal (the own keys of a causal mask) or sees every key (a
# step's keys under causal or full attention) run without tile lists: fragmask's
# window forward and backward, as a one-GPU causal call does. False: always the lists.
UNMASKED_PARTS = True


class _Part:
    """One attention call's mask: ``mask`` (a fragmask.Mask), or, with
    ``UNMASKED_PARTS``, none where the description says the mask is plain causal
    (``causal``) or every row sees every key (``full``)."""

    def __init__(self, mask, causal=False, full=False):
        self.mask, self.causal, self.full = mask, bool(causal), bool(full)

    def call(self):
        """(mask, causal) of the call."""
        if UNMASKED_PARTS and (self.full or self.causal):
            return None, self.causal and not self.full
        return self.mask, False


def _sees_all(desc, rows, keys):
    """Whether the description says every row sees every key (interval masks; False
    for the others, which are not asked)."""
    sees_all = getattr(desc, "sees_all", None)
    return bool(sees_all(rows, keys)) if sees_all is not None else False


def _one_causal_document(desc, rows):
    """Whether the rows against themselves are causal with one document (the own keys
    of a causal mask's zigzag shard)."""
    own = getattr(desc, "own_documents", None)
    docs = own(rows) if own is not None else None
    return docs is not None and docs[0] == "causal" and not docs[1].any()


def _row_selector(step, local_len, idx):
    """How a step's rows are taken from the rank's: ``None`` (all of them), a
    ``slice`` (one run of consecutive tokens: views, no copy) or an index tensor."""
    runs = step.row_runs
    if len(runs) == 1:
        a, b = runs[0]
        return None if (a, b) == (0, local_len) else slice(a, b)
    return idx(step.rows)


# Rows of the staged backward's workspace runs: a step's rows that are one run of whole
# 128-row runs (the backward's workspace padding) share the own part's rows in place.
STAGED_ROW_RUN = 128


def _staged_rows(sel, local_len):
    """Where a step's part runs in the staged backward: ``("same", 0)`` (its rows are
    all the rank's), ``("offset", a)`` (one run of rows a.. of whole 128-row runs: the
    part runs on that slice, its workspace rows offset), or ``("all", 0)`` (other row
    sets: the part runs over all the rank's rows with a mask of every row)."""
    if sel is None:
        return ("same", 0)
    if isinstance(sel, slice):
        a, b = sel.start, sel.stop
        if a % STAGED_ROW_RUN == 0 and (b - a) % STAGED_ROW_RUN == 0:
            return ("offset", int(a))
    return ("all", 0)


def _runs_of(tokens):
    """Ascending tokens as (start, end) runs of consecutive ones."""
    from ._exchange import _runs

    return _runs(np.asarray(tokens, dtype=np.int64))


def _with_offsets(runs):
    out, off = [], 0
    for a, b in runs:
        out.append((a, b, off))
        off += b - a
    return tuple(out)


# At most this many runs are added slice by slice (one small kernel each); more go
# through one index_add_.
MAX_SLICE_RUNS = 16


def _add_runs(dst, sel, runs, src):
    """dst[:, :, rows] += src for the rows a selection names: ``sel`` None (all), a
    slice, or an index tensor whose ``runs`` ((start, end, offset)) are consecutive
    tokens. Slices add in place (no index kernel); many runs take ``index_add_``."""
    if sel is None:
        dst.add_(src)
    elif isinstance(sel, slice):
        dst[:, :, sel].add_(src)
    elif len(runs) <= MAX_SLICE_RUNS:
        for a, b, off in runs:
            dst[:, :, a:b].add_(src[:, :, off:off + (b - a)])
    else:
        dst.index_add_(2, sel, src)


def _token_selector(tokens, idx):
    """Ascending local tokens as a ``slice`` when consecutive, else an index tensor."""
    if tokens[-1] - tokens[0] + 1 == tokens.size:
        return slice(int(tokens[0]), int(tokens[-1]) + 1)
    return idx(tokens)


def high_priority_group(group=None):
    """A NCCL process group over the ranks of ``group`` (default: every rank) whose
    streams have high priority, for ``attention(..., group=...)``: the exchange's NCCL
    kernels then take the SMs the attention kernels free before the attention kernels'
    next blocks, so a transfer queued beside an attention kernel runs beside it instead
    of after its last wave (docs/distributed.md). A collective call
    (``torch.distributed.new_group``): every process of the default group calls it,
    once, in the same order."""
    dist = _dist()
    ranks = None if group is None else dist.get_process_group_ranks(group)
    opts = dist.ProcessGroupNCCL.Options(is_high_priority_stream=True)
    return dist.new_group(ranks=ranks, backend="nccl", pg_options=opts)


def _global_rank(group, r):
    if group is None:
        return r
    return _dist().get_global_rank(group, r)


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
    key = (id(mask), rank, str(device), tuple(block), id(group))
    hit = cache.get(key)
    if hit is None or hit[0] is not mask:
        if mask is not plan.mask:
            _check_compatible(plan, mask)
        hit = cache[key] = (mask, Prepared(plan, mask, rank, device, block, group))
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


def _refuse_deterministic(deterministic):
    """Raises where a deterministic backward is asked of a call that will need one: the
    context-parallel backward has none (each part's dQ is reduced without an order, and
    a high-priority group's parts sum into one dQ accumulator over shared rows, which the
    host's deterministic mode refuses: its semaphores are laid out per call).
    ``deterministic=True`` raises ``RuntimeError``; ``None`` follows torch's flag as torch's
    own nondeterministic ops do (``RuntimeError`` under
    ``torch.use_deterministic_algorithms(True)``, a ``UserWarning`` with
    ``warn_only=True``); ``False`` runs the backward as it is."""
    import torch

    if deterministic is False:
        return
    if deterministic is True:
        raise RuntimeError(
            "fragmask.distributed.attention: deterministic=True: the context-parallel "
            "backward has no deterministic mode (its dQ reductions over the ranks' parts "
            "are unordered); use fragmask.attention on one GPU for bit-identical gradients, "
            "or pass deterministic=False")
    if deterministic is not None:
        raise TypeError("fragmask.distributed.attention: deterministic must be None, True "
                        f"or False, not {type(deterministic).__name__}")
    if not torch.are_deterministic_algorithms_enabled():
        return
    why = ("fragmask.distributed.attention: torch.use_deterministic_algorithms(True) is "
           "set, and the context-parallel backward has no deterministic mode (its dQ "
           "reductions over the ranks' parts are unordered); pass deterministic=False to "
           "run it anyway, or use fragmask.attention on one GPU for bit-identical gradients")
    if torch.is_deterministic_algorithms_warn_only_enabled():
        import warnings

        warnings.warn(why, stacklevel=3)
        return
    raise RuntimeError(why)


def attention(q, k, v, plan, mask=None, group=None, *, scale=None, return_lse=False,
              layout="bhsd", block=(128, 128), overlap=True, deterministic=None):
    """Masked attention of this rank's shard: ``q``, ``k``, ``v`` hold the rank's
    tokens in plan order (``plan.shard`` / ``plan.to_plan_order``), ``[B, H, S/P, D]``
    (``layout="bhsd"``) or ``[B, S/P, H, D]`` (``"bshd"``); k and v may have fewer
    heads (GQA). ``mask`` is the description the plan was made from (default
    ``plan.mask``). Returns this rank's output (and fp32 lse ``[B, H, S/P]`` with
    ``return_lse``), equal to the rows of single-GPU ``fragmask.attention`` over the
    whole sequence. Differentiable in q, k and v.

    ``overlap=True`` (default): the exchange runs beside the compute (own keys first,
    then each step's received chunks, merged in fp32; the backward sends dK/dV back
    while it computes). ``overlap=False``: one exchange, then one attention call over
    all the rank's keys.

    ``deterministic``: the backward has no deterministic mode. A call that will need a
    backward (grad enabled, an input requiring grad) raises ``RuntimeError`` with
    ``deterministic=True``, and with ``None`` (default) under
    ``torch.use_deterministic_algorithms(True)`` (a warning with ``warn_only=True``, as
    torch's own nondeterministic ops); ``False`` runs the non-deterministic backward
    whatever torch's flag. Forward-only calls run whatever it says."""
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
    if grad:
        _refuse_deterministic(deterministic)
    elif not (deterministic is None or deterministic is True or deterministic is False):
        _refuse_deterministic(deterministic)     # names the bad value
    if overlap:
        if grad:
            o, lse = _overlapped_fn().apply(q, k, v, prep, group, scale)
        else:
            o, lse = _overlapped_forward(q, k, v, prep, group, scale)[:2]
    else:
        kg, vg = gather_kv(k, v, prep, group)
        o, lse = _fm_attention(q, kg, vg, prep.mask, scale=scale, return_lse=True,
                               deterministic=False)
    if layout == "bshd":
        o = o.transpose(1, 2)
    return (o, lse) if return_lse else o


# The overlapped path ----------------------------------------------------------------

# Phase timing (bench/cp_bench.py): a list to append (phase, stream, CUDA event) to, or
# None. Each event closes the phase it names on its stream, opened by the stream's
# previous event.
PROFILE = None


def _mark(phase, stream="compute"):
    if PROFILE is None:
        return
    import torch

    ev = torch.cuda.Event(enable_timing=True)
    ev.record()
    PROFILE.append((phase, stream, ev))


def phase_table(marks):
    """``PROFILE``'s marks (after a synchronize) -> {(stream, phase): ms}, summed over
    the phases of one name."""
    out, last = {}, {}
    for phase, stream, ev in marks:
        prev = last.get(stream)
        if prev is not None and phase != "start":
            key = (stream, phase)
            out[key] = out.get(key, 0.0) + prev.elapsed_time(ev)
        last[stream] = ev
    return out


_SIDE = {}
_PARTS = {}

# The forward's received keys' parts beside the own keys' part (``CONCURRENT_FORWARD``):
# they run on a parts stream as their K/V land, their blocks queued behind the own
# part's, so the own kernel's last wave is filled, and are merged after both. False: one
# after the other on the compute stream. None (default): on where the group's NCCL
# streams have high priority (``_nccl_high_priority``), the configuration it was
# measured faster in (docs/distributed.md, "Measurements").
CONCURRENT_FORWARD = None


class _Streams:
    """The compute stream (torch's current), the side stream the exchange is packed
    and posted from, and the parts stream (one of each per device, kept). On the CPU
    (the gloo tests) all are the same and waits are no-ops."""

    def __init__(self, device):
        import torch

        self.cuda = device.type == "cuda"
        if self.cuda:
            self.compute = torch.cuda.current_stream(device)
            side = _SIDE.get(device.index)
            if side is None:
                side = _SIDE[device.index] = torch.cuda.Stream(device)
            self.side = side
            parts = _PARTS.get(device.index)
            if parts is None:
                parts = _PARTS[device.index] = torch.cuda.Stream(device)
            self.parts = parts

    def point(self, stream):
        """An event at ``stream``'s current point (None on the CPU)."""
        if not self.cuda:
            return None
        import torch

        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    def on_parts(self, after=None):
        """The parts stream as the current one, after the compute stream's point
        ``after`` (an event) if given."""
        import contextlib
        import torch

        if not self.cuda:
            return contextlib.nullcontext()
        if after is not None:
            self.parts.wait_event(after)
        return torch.cuda.stream(self.parts)

    def join_parts(self):
        """The compute stream waits for what the parts stream has queued."""
        if self.cuda:
            self.compute.wait_stream(self.parts)

    def packed(self):
        """An event at the side stream's current point (None on the CPU)."""
        if not self.cuda:
            return None
        import torch

        ev = torch.cuda.Event()
        ev.record(self.side)
        return ev

    def on_side(self):
        import contextlib
        import torch

        if not self.cuda:
            return contextlib.nullcontext()
        self.side.wait_stream(self.compute)    # what the side stream reads is ready
        return torch.cuda.stream(self.side)


def _switch(flag, group):
    """A switch's value: True or False as set, or (None) whether the group's NCCL
    streams have high priority."""
    return _nccl_high_priority(group) if flag is None else bool(flag)


_HIGH_PRIORITY = {}


def _nccl_high_priority(group):
    """Whether the group's NCCL streams have high priority (its options, as
    ``high_priority_group`` makes them, or ``TORCH_NCCL_HIGH_PRIORITY``), looked up once
    per group; False without torch.distributed or NCCL."""
    import os

    key = id(group)
    hit = _HIGH_PRIORITY.get(key)
    if hit is not None and hit[0] is group:
        return hit[1]
    high = os.environ.get("TORCH_NCCL_HIGH_PRIORITY", "").lower() in ("1", "true", "yes")
    try:
        import torch

        dist = _dist()
        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        high = high or bool(pg._get_backend(torch.device("cuda")).options
                            .is_high_priority_stream)
    except Exception:    # no torch, no process group, not NCCL: the variable alone
        pass
    _HIGH_PRIORITY[key] = (group, high)
    return high


def _post(pairs, group):
    """Posts P2P sends and receives (``pairs``: [(op, tensor, global peer)]) from the
    side stream: NCCL's stream waits for the side stream's packing, the compute stream
    goes on. Returns the works."""
    dist = _dist()
    ops = [dist.P2POp(dist.isend if op == "send" else dist.irecv, t, peer, group)
           for op, t, peer in pairs]
    if not ops:
        return []
    return dist.batch_isend_irecv(ops)


# Packed sends: the compute stream waits for the packing before its next kernel (the own
# keys' forward). A packing kernel queued on the side stream beside a running attention
# kernel starts only after that kernel's last wave, and the transfer after it
# (docs/distributed.md, "How a call runs"). False: the previous order.
WAIT_FOR_PACKING = True


def _wait(works):
    """The compute stream waits for the works (NCCL: a stream wait, the CPU goes on)."""
    for w in works:
        w.wait()


def _take(t, sel):
    """A contiguous buffer of the selected tokens (dim 2) of t (t itself when it is
    already one)."""
    if isinstance(sel, slice):
        return t[:, :, sel].contiguous()
    return t.index_select(2, sel)


def _rows_of(t, sel):
    """The step's rows of a [B, H, S, ...] tensor: itself, a view, or a gathered copy."""
    if sel is None:
        return t
    if isinstance(sel, slice):
        return t[:, :, sel]
    return t.index_select(2, sel)


def _merge_into(o, lse, sel, o_p, lse_p):
    """Merges the partial state (o_p, lse_p) of a step's rows into (o, lse) in place
    (``_merge.merge_into_``: fragmask's GPU merge kernel, fp32). A row neither part sees
    keeps o = 0, lse = -inf."""
    from ._merge import merge_into_

    merge_into_(o, lse, o_p, lse_p, sel)


def _part_forward(q, k, v, part, scale):
    """(o, fp32 lse) of q against one part of the keys (fragmask.attention)."""
    mask, causal = part.call()
    return _fm_attention(q, k, v, mask, causal=causal, scale=scale, return_lse=True)


def _part_backward(q, k, v, o, lse, do, part, scale):
    """(dq, dk, dv) of one part of the keys given the merged (o, lse) of all parts:
    fragmask's backward kernel (``fragmask::attention_backward``) with the part's mask
    and its transposed lists (or none: ``_Part``)."""
    from .. import _ops

    torch = _ops._torch()
    _ops._register()
    mask, causal = part.call()
    scale = q.shape[3] ** -0.5 if scale is None else float(scale)
    if mask is None:
        none = (None,) * 6
        return _ops._backward_op(q, k, v, o, lse, do, *none, *none, [], causal, [-1, -1],
                                 scale, False)
    lists = _ops._device_lists(torch, mask, q.device)
    tlists, bwd_id = _ops._device_transposed(torch, mask, q.device)
    meta = list(mask._meta) + [bwd_id]
    return _ops._backward_op(q, k, v, o, lse, do, *lists, *tlists, meta, False, [-1, -1],
                             scale, False)


def _overlapped_forward(q, k, v, prep, group, scale):
    """(o, lse, received K/V per step). Step 0's chunks are packed and posted on the
    side stream before the own keys' attention; each later step is posted as soon as
    the one before has landed, before that one is computed (``forward_events``)."""
    streams = _Streams(q.device)
    concurrent = streams.cuda and _switch(CONCURRENT_FORWARD, group)
    B, Hk, _, Dk = k.shape
    Dv = v.shape[3]
    steps = prep.steps
    recv = [None] * len(steps)
    works = [None] * len(steps)
    keep = []
    pending = []
    o = lse = None
    # the parts stream starts where the inputs are ready
    start = streams.point(streams.compute) if concurrent else None
    _mark("start")
    for ev in forward_events(len(steps)):
        kind = ev[0]
        if kind == "post":
            i = ev[1]
            st = steps[i]
            pairs = []
            if st.recv_len:
                # allocated on the compute stream, which reads them
                recv[i] = (k.new_empty((B, Hk, st.recv_len, Dk)),
                           v.new_empty((B, Hk, st.recv_len, Dv)))
            packed = None
            with streams.on_side():
                _mark("start", "side")
                if prep.step_send[i] is not None:
                    ks, vs = (_take(t, prep.step_send[i]) for t in (k, v))
                    keep.append((ks, vs))
                    pairs += [("send", ks, prep.peer_dst[i]), ("send", vs, prep.peer_dst[i])]
                    if WAIT_FOR_PACKING and (ks.data_ptr() != k.data_ptr()
                                             or vs.data_ptr() != v.data_ptr()):
                        packed = streams.packed()
                if recv[i] is not None:
                    pairs += [("recv", recv[i][0], prep.peer_src[i]),
                              ("recv", recv[i][1], prep.peer_src[i])]
                works[i] = _post(pairs, group)
                _mark("pack + post K/V", "side")
                if PROFILE is not None:
                    _wait(works[i])             # the side stream only (timing)
                    _mark("K/V in flight", "side")
            if packed is not None:
                # The compute stream's next kernel waits for the packing: the transfer's
                # NCCL kernel, launched before it, is not left behind its last wave.
                streams.compute.wait_event(packed)
        elif kind == "own":
            o, lse = _part_forward(q, k, v, prep.own_part, scale)
            _mark("own keys forward")
        elif kind == "wait":
            if concurrent:
                with streams.on_parts(after=start):
                    _wait(works[ev[1]])
            else:
                _wait(works[ev[1]])
                _mark("wait for K/V")
        else:
            i = ev[1]
            sel, m = prep.step_rows[i], prep.step_parts[i]
            if m is None:
                continue
            kr, vr = recv[i]
            if concurrent:
                with streams.on_parts(after=start):
                    o_p, lse_p = _part_forward(_rows_of(q, sel), kr, vr, m, scale)
                # made on the parts stream, merged on the compute stream
                o_p.record_stream(streams.compute)
                lse_p.record_stream(streams.compute)
                pending.append((sel, o_p, lse_p))
                continue
            o_p, lse_p = _part_forward(_rows_of(q, sel), kr, vr, m, scale)
            _mark("received keys forward")
            _merge_into(o, lse, sel, o_p, lse_p)
            _mark("merge")
    if concurrent:
        streams.join_parts()
        _mark("received keys forward")
        for sel, o_p, lse_p in pending:
            _merge_into(o, lse, sel, o_p, lse_p)
        _mark("merge")
    del keep
    return o, lse, recv


# The staged backward: every part's main kernel sums into one dQ accumulator over the
# rank's rows (the own part's preprocess first, its postprocess last: one dQ cast, no dq
# adds, no copies of a step's rows of o and dO), and dK and dV share one buffer (one
# add per run of returned tokens).
# False: each part is a whole backward call and its dq is added to the own part's. None
# (default): staged where the group's NCCL streams have high priority; on default-
# priority streams the dK/dV transfer queued behind the own keys' main kernel ran late
# and the staged backward measured slower on the causal mask (docs/distributed.md).
STAGED_BACKWARD = None
# Every step's part over all the rank's rows, whatever its rows (the GPU tests' check of
# that placement on masks whose rows would run on an aligned run).
STAGED_ALL_ROWS = False


def _stage_backward(q, k, v, o, lse, do, part, scale, dq, dk, dv, stages, rows, offset):
    """Enqueues the kernels ``stages`` ((pre, main, post)) of one part's backward on the
    current stream with the workspace rows of a call over ``rows`` query rows, this
    part's starting at ``offset`` (``attention_backward_stages``); dk and dv receive the
    part's key gradients, dq (written by the postprocess) the sum of every part's."""
    from .. import _ops

    torch = _ops._torch()
    mask, causal = part.call()
    scale = q.shape[3] ** -0.5 if scale is None else float(scale)
    dev = q.device
    lists = tlists = None
    mask_id = 0
    if mask is not None:
        lists = tuple(t.data_ptr() for t in _ops._device_lists(torch, mask, dev))
        tl, mask_id = _ops._device_transposed(torch, mask, dev)
        tlists = tuple(t.data_ptr() for t in tl)
    pre, main, post = stages
    _ops._API["attention_backward_stages"](
        _ops._view(q), _ops._view(k), _ops._view(v), _ops._view(o), lse.data_ptr(),
        _ops._view(do), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), mask_id, lists,
        tlists, causal, -1, -1, scale, _ops._get_stream(dev.index), dev.index,
        q.dtype == torch.float16, pre, main, post, rows, offset)


class _CpuStages:
    """The staged backward on the CPU (the gloo tests): the accumulator is an f64
    tensor over the rank's rows, each part's dq (``_part_backward``) added at its
    rows."""

    def __init__(self, q):
        self.acc = None
        self.q = q

    def __call__(self, q, k, v, o, lse, do, part, scale, dq, dk, dv, stages, rows,
                 offset, sel=None):
        import torch

        pre, main, post = stages
        if pre:
            self.acc = torch.zeros(self.q.shape, dtype=torch.float64)
        if main:
            dqs, dks, dvs = _part_backward(q, k, v, o, lse, do, part, scale)
            dk.copy_(dks)
            dv.copy_(dvs)
            if sel is not None and not isinstance(sel, slice):
                self.acc.index_add_(2, sel, dqs.to(torch.float64))
            else:
                self.acc[:, :, offset:offset + q.shape[2]] += dqs.to(torch.float64)
        if post:
            dq.copy_(self.acc.to(dq.dtype))


def _staged_backward(q, k, v, o, lse, do, recv, prep, group, scale):
    """(dq, dk, dv) of the staged backward: the own part's preprocess; each step's main
    kernel (on its aligned run of rows, or over all the rank's rows with a mask of every
    row), its dK and dV posted back to the owner at once; the own part's
    main kernel and postprocess while they travel; then the returned dK/dV added to the
    rank's own (``backward_events``)."""
    import torch

    streams = _Streams(q.device)
    steps = prep.steps
    S = q.shape[2]
    B, Hk, _, D = k.shape
    joint = tuple(k.shape) == tuple(v.shape)
    back = [None] * len(steps)
    works = [None] * len(steps)
    grads = [None] * len(steps)
    dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    if joint:
        dkv = k.new_empty((2,) + tuple(k.shape))
        dk, dv = dkv[0], dkv[1]
        dkv_rows = dkv.view(2 * B, Hk, S, D)      # both as one [2B, Hk, S, D] tensor
    else:
        dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (k, v))
    stage = _stage_backward if streams.cuda else _CpuStages(q)
    own = prep.own_part
    _mark("start")
    stage(q, k, v, o, lse, do, own, scale, dq, dk, dv, (True, False, False), S, 0)
    for ev in backward_events(len(steps)):
        kind = ev[0]
        if kind == "compute":
            i = ev[1]
            if recv[i] is None:
                continue
            kr, vr = recv[i]
            n = kr.shape[2]
            if joint:
                gk = k.new_empty((2, B, Hk, n, D))
                gdk, gdv = gk[0], gk[1]
                grads[i] = (gdk, gdv)
            else:
                gdk, gdv = torch.empty_like(kr), torch.empty_like(vr)
                grads[i] = (gdk, gdv)
            how = prep.step_staged[i]
            if how is None:
                for g in grads[i]:
                    g.zero_()
                continue
            mode, offset = how
            sel = prep.step_rows[i]
            if mode == "all" or STAGED_ALL_ROWS:
                part, rows_sel, offset = prep.all_rows_part(i), None, 0
            else:
                part, rows_sel = prep.step_parts[i], sel
            qs, os_, ls, ds = (_rows_of(t, rows_sel) for t in (q, o, lse, do))
            if stage is _stage_backward:
                stage(qs, kr, vr, os_, ls, ds, part, scale, dq, gdk, gdv,
                      (False, True, False), S, offset)
            else:
                stage(qs, kr, vr, os_, ls, ds, part, scale, dq, gdk, gdv,
                      (False, True, False), S, offset, sel=rows_sel)
            _mark("received keys backward")
        elif kind == "post":
            i = ev[1]
            st = steps[i]
            pairs = []
            if prep.step_send[i] is not None:
                n = st.send_local.size
                if joint:
                    # one buffer, received as its dK and dV halves: the messages are the
                    # previous backward's, so ranks that chose differently still match
                    back[i] = (k.new_empty((2, B, Hk, n, D)),)
                else:
                    back[i] = (k.new_empty((B, Hk, n, D)), v.new_empty((B, Hk, n, v.shape[3])))
            with streams.on_side():
                _mark("start", "side")
                if grads[i] is not None:
                    pairs += [("send", g, prep.peer_src[i]) for g in grads[i]]
                if back[i] is not None:
                    halves = (back[i][0][0], back[i][0][1]) if joint else back[i]
                    pairs += [("recv", b, prep.peer_dst[i]) for b in halves]
                works[i] = _post(pairs, group)
                _mark("post dK/dV", "side")
                if PROFILE is not None:
                    _wait(works[i])             # the side stream only (timing)
                    _mark("dK/dV in flight", "side")
        elif kind == "own":
            stage(q, k, v, o, lse, do, own, scale, dq, dk, dv, (False, True, True), S, 0)
            _mark("own keys backward")
        else:
            _wait(works[ev[1]])
            _mark("wait for dK/dV")
    if joint:
        _add_returned((dkv_rows,), [None if b is None else (b[0].view(2 * B, Hk, -1, D),)
                                    for b in back], prep)
    else:
        _add_returned((dk, dv), back, prep)
    _mark("dK/dV adds")
    del grads
    return dq, dk, dv


def _overlapped_backward(q, k, v, o, lse, do, recv, prep, group, scale):
    """(dq, dk, dv): each step's part first, its dK/dV posted back to the owner at
    once; the own keys' part while they travel; then the returned dK/dV added to the
    rank's own (``backward_events``). With ``STAGED_BACKWARD``, ``_staged_backward``."""
    import torch

    if _switch(STAGED_BACKWARD, group):
        return _staged_backward(q, k, v, o, lse, do, recv, prep, group, scale)

    streams = _Streams(q.device)
    steps = prep.steps
    back = [None] * len(steps)
    works = [None] * len(steps)
    grads = [None] * len(steps)
    dq_parts = []
    dq = dk = dv = None
    _mark("start")
    for ev in backward_events(len(steps)):
        kind = ev[0]
        if kind == "compute":
            i = ev[1]
            st, sel, m = steps[i], prep.step_rows[i], prep.step_parts[i]
            if recv[i] is None:
                continue
            kr, vr = recv[i]
            if m is None:
                grads[i] = (torch.zeros_like(kr), torch.zeros_like(vr))
                continue
            qs = _rows_of(q, sel)
            os_, ls, ds = (_rows_of(t, sel).contiguous() for t in (o, lse, do))
            dqs, dks, dvs = _part_backward(qs, kr, vr, os_, ls, ds, m, scale)
            grads[i] = (dks, dvs)
            dq_parts.append((sel, prep.step_row_runs[i], dqs))
            _mark("received keys backward")
        elif kind == "post":
            i = ev[1]
            st = steps[i]
            pairs = []
            if prep.step_send[i] is not None:
                n = st.send_local.size
                back[i] = (k.new_empty((k.shape[0], k.shape[1], n, k.shape[3])),
                           v.new_empty((v.shape[0], v.shape[1], n, v.shape[3])))
            with streams.on_side():
                _mark("start", "side")
                if grads[i] is not None:
                    pairs += [("send", grads[i][0], prep.peer_src[i]),
                              ("send", grads[i][1], prep.peer_src[i])]
                if back[i] is not None:
                    pairs += [("recv", back[i][0], prep.peer_dst[i]),
                              ("recv", back[i][1], prep.peer_dst[i])]
                works[i] = _post(pairs, group)
                _mark("post dK/dV", "side")
                if PROFILE is not None:
                    _wait(works[i])             # the side stream only (timing)
                    _mark("dK/dV in flight", "side")
        elif kind == "own":
            dq, dk, dv = _part_backward(q, k, v, o, lse, do, prep.own_part, scale)
            _mark("own keys backward")
            for sel, runs, dqs in dq_parts:      # fp32 adds, one rounding each
                _add_runs(dq, sel, runs, dqs)
            _mark("dq adds")
        else:
            _wait(works[ev[1]])
            _mark("wait for dK/dV")
    _add_returned((dk, dv), back, prep)
    _mark("dK/dV adds")
    del grads
    return dq, dk, dv


def _add_returned(dsts, back, prep):
    """Adds the gradients the other ranks returned to the rank's own (``dsts``: dK and
    dV, or both as one tensor; ``back[i]``: step i's returned tensors in the same
    order, or None): with one step, in place (each token at most once: one rounding of
    an fp32 sum); with several, summed in fp32 over the rows sent and rounded once."""
    got = [i for i, b in enumerate(back) if b is not None]
    if not got:
        return
    if len(got) == 1:
        i = got[0]
        sel = prep.step_send[i]
        for d, b in zip(dsts, back[i]):
            _add_runs(d, sel, prep.step_send_runs[i], b)
        return
    import torch

    rows = prep.send_rows
    for j, d in enumerate(dsts):
        wide = torch.promote_types(d.dtype, torch.float32)
        acc = d.index_select(2, rows).to(wide)
        for i in got:
            pos = torch.searchsorted(rows, prep.step_send_idx[i])
            acc.index_add_(2, pos, back[i][j].to(wide))
        d.index_copy_(2, rows, acc.to(d.dtype))


_OVERLAPPED = None


def _overlapped_fn():
    global _OVERLAPPED
    if _OVERLAPPED is not None:
        return _OVERLAPPED
    import torch

    class Overlapped(torch.autograd.Function):
        """The overlapped forward and backward (one autograd node): the backward
        reuses the forward's received K/V and its merged (o, lse)."""

        @staticmethod
        def forward(ctx, q, k, v, prep, group, scale):
            o, lse, recv = _overlapped_forward(q, k, v, prep, group, scale)
            ctx.mark_non_differentiable(lse)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.recv, ctx.prep, ctx.group, ctx.scale = recv, prep, group, scale
            return o, lse

        @staticmethod
        def backward(ctx, do, dlse):
            q, k, v, o, lse = ctx.saved_tensors
            do = torch.zeros_like(o) if do is None else do.contiguous()
            dq, dk, dv = _overlapped_backward(q, k, v, o, lse, do, ctx.recv, ctx.prep,
                                              ctx.group, ctx.scale)
            return dq, dk, dv, None, None, None

    _OVERLAPPED = Overlapped
    return Overlapped
