"""Context-parallel attention (fragmask.distributed) on the GPUs of one host, run by
``torchrun --nproc-per-node 2 bench/cp_bench.py [--quick] [--only NAME,...]``.

Per case (bf16, D=128): one training step of attention (forward + backward) over the
whole sequence on one GPU (rank 0 alone, fragmask.attention with the global mask) and
the same step sharded over every rank (fragmask.distributed.attention: exchange, local
attention, reverse exchange of dK/dV); the step time of the sharded call is the
slowest rank's. Also: each rank's attention alone (its gathered keys, no exchange:
the load balance), the K/V bytes each rank sends against a full K/V all-gather, the
one-off per-step costs (planner on the CPU, the rank's mask pack), and, for the causal
mask, PyTorch's context_parallel with SDPA on the same GPUs. Prints one line per
measurement and a JSON summary on rank 0.

For the document and causal cases: ``--ab MODULE`` alternates another copy of
fragmask.distributed (e.g. the main branch's, installed as
fragmask.distributed_base) with this one in one process, ``--sweep`` measures other
plans, ``--trace DIR`` writes torch.profiler traces of the sharded and one-GPU steps."""

import argparse
import datetime
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist

import fragmask
import fragmask.distributed as fd


STEPS = (3, 10)     # warm-up and timed steps (--lean: 2, 5; the document case 3, 20)
GROUP = None        # the sharded steps' group (--group high-priority: HIGH_PRIORITY)
SWEEP_OWNERS = None  # --sweep-owners: {label: owner per chunk} for the document sweep
HIGH_PRIORITY = None   # fragmask.distributed.high_priority_group(), made at start


def step_ms(fn, warmup=None, iters=None):
    """Mean ms of fn() over iters, every rank started together; (this rank's, max)."""
    warmup = STEPS[0] if warmup is None else warmup
    iters = STEPS[1] if iters is None else iters
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn()
    b.record()
    torch.cuda.synchronize()
    mine = a.elapsed_time(b) / iters
    t = torch.tensor([mine], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return mine, t.item()


def phases(fn):
    """One step of fn with fragmask.distributed's phase events: per rank, {"stream:
    phase": ms} (compute stream: what it spent on each phase, waits included; side
    stream: packing and posting, and how long each transfer was in flight)."""
    from fragmask.distributed import _attention as A

    torch.cuda.synchronize()
    dist.barrier()
    A.PROFILE = []
    try:
        fn()
        torch.cuda.synchronize()
        table = {f"{st}: {ph}": ms for (st, ph), ms in A.phase_table(A.PROFILE).items()}
    finally:
        A.PROFILE = None
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, table)
    return out


def all_values(x):
    t = torch.tensor([float(x)], device="cuda")
    out = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return [o.item() for o in out]


def hashed_rows(S, keep, seed):
    """rows(pos) -> bool [len(pos), S] pseudo-random bits of (row, col), on the GPU."""
    cols = torch.arange(S, device="cuda", dtype=torch.int64)
    limit = int(keep * (1 << 20))

    def rows(pos):
        r = torch.as_tensor(np.asarray(pos), device="cuda", dtype=torch.int64)
        out = torch.empty((r.numel(), S), dtype=torch.bool, device="cuda")
        for a in range(0, r.numel(), 2048):
            x = r[a:a + 2048, None] * 0x9E3779B1 + cols[None, :] * 0x85EBCA77 + seed
            x = x ^ (x >> 15)
            x = x * 0x2C1B3C6D
            x = x ^ (x >> 12)
            out[a:a + 2048] = (x & ((1 << 20) - 1)) < limit
        return out
    return rows


def doc_ids(seed, S, n=None):
    """Document ids of ``n`` causal documents of random lengths (``n`` random in 4..24
    when None) over S tokens, seeded."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 25)) if n is None else n
    lengths = rng.integers(1, 100, size=n).astype(np.float64)
    lengths = np.maximum((lengths / lengths.sum() * S).astype(np.int64), 1)
    lengths[-1] += S - lengths.sum()
    return np.repeat(np.arange(n), lengths)


def case_list(quick, doc_seeds=()):
    rng = np.random.default_rng(2026)
    S_doc = 16384 if quick else 65536
    lengths = rng.integers(1, 100, size=12).astype(np.float64)
    lengths = np.maximum((lengths / lengths.sum() * S_doc).astype(np.int64), 1)
    lengths[-1] += S_doc - lengths.sum()
    ids = np.repeat(np.arange(12), lengths)
    S_rand = 8192 if quick else 32768
    N = 2 * (1536 if quick else 23296)       # write-up 002's 23296 tokens, twice
    Qb = N // 64
    keep = max(1, int(round(Qb * 0.10)))
    H = 16
    idx = np.stack([np.stack([rng.permutation(Qb)[:keep] for _ in range(Qb)])
                    for _ in range(H)])
    num = np.full((H, Qb), keep)
    S_causal = 16384 if quick else 65536
    cases = {
        "document-causal (12 docs)": dict(
            desc=fd.Intervals.documents(ids), S=S_doc,
            whole=lambda: fragmask.Mask.from_predicate("causal", S_doc, doc_ids=ids),
            doc_lengths=lengths.tolist(), variants=True, steps=(3, 20)),
        "causal": dict(desc=fd.Intervals.causal(S_causal), S=S_causal,
                       whole=lambda: fragmask.Mask.from_predicate("causal", S_causal),
                       sdpa_cp=True),
        "VSA block lists (10% kept)": dict(
            desc=fd.BlockLists(idx, num), S=N,
            whole=lambda: fragmask.Mask.from_blocks(idx, num, seqlen_k=N)),
        "random 50%": dict(
            desc=fd.DenseRows(S_rand, rows=hashed_rows(S_rand, 0.5, 7),
                              row_work=np.full(S_rand, 0.5 * S_rand), all_keys=True),
            S=S_rand,
            whole=lambda: fragmask.Mask.from_dense(hashed_rows(S_rand, 0.5, 7)(
                np.arange(S_rand)), transposed=True)),
    }
    for seed in doc_seeds:
        # more document masks (--doc-seeds): does the plan hold beyond the one above?
        sids = doc_ids(seed, S_doc)
        cases[f"document-causal seed {seed} ({sids.max() + 1} docs)"] = dict(
            desc=fd.Intervals.documents(sids), S=S_doc,
            whole=lambda sids=sids: fragmask.Mask.from_predicate("causal", S_doc,
                                                                 doc_ids=sids),
            steps=(3, 20))
    return cases


def one_gpu_step(whole, S, H, D, dev, g, dt):
    """ms of one forward + backward over the whole sequence with the global mask."""
    mask = whole()
    if not mask.has_transposed:
        mask = mask.with_transposed(device=dev)    # the backward's lists, on the GPU
    mask.to(dev)
    q, k, v, do = (torch.randn(1, H, S, D, device=dev, dtype=dt, generator=g)
                   for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_()

    def one():
        o = fragmask.attention(q, k, v, mask)
        o.backward(do)
    warmup, iters = STEPS
    for _ in range(warmup):
        one()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        one()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters


def run_case(name, spec, H, D, rank, P, dev, report, lean=False):
    """One case; a case's ``steps`` (warm-up, timed: short steps take more) replace
    the run's for its timings."""
    global STEPS
    saved = STEPS
    STEPS = spec.get("steps", STEPS)
    try:
        _run_case(name, spec, H, D, rank, P, dev, report, lean)
    finally:
        STEPS = saved


def _run_case(name, spec, H, D, rank, P, dev, report, lean=False):
    S = spec["S"]
    desc = spec["desc"]
    t0 = time.perf_counter()
    plan = fd.plan(desc, P)
    plan_ms = (time.perf_counter() - t0) * 1e3
    g = torch.Generator(device=dev).manual_seed(5)
    dt = torch.bfloat16
    row = {"S": S, "H": H, "D": D, "P": P, "group": "default" if GROUP is None else
           "high-priority NCCL streams", "plan_ms_cpu": plan_ms,
           "strategy": plan.strategy, "work_imbalance": plan.imbalance}
    # The whole step on one GPU (rank 0 alone; the others wait for its verdict, so a
    # failure there fails every rank at the same point).
    failed = ""
    if spec.get("whole") is not None and rank == 0:
        try:
            row["one_gpu_ms"] = one_gpu_step(spec["whole"], S, H, D, dev, g, dt)
        except Exception as e:  # reported below, on every rank
            failed = f"{type(e).__name__}: {e}"
        torch.cuda.empty_cache()
    flag = torch.tensor([1.0 if failed else 0.0], device="cuda")
    dist.broadcast(flag, 0)
    if flag.item():
        raise RuntimeError(f"the one-GPU baseline failed on rank 0: {failed}")
    # The sharded step.
    S_loc = plan.local_seqlen
    ql, kl, vl, dol = (torch.randn(1, H, S_loc, D, device=dev, dtype=dt, generator=g)
                       for _ in range(4))
    for t in (ql, kl, vl):
        t.requires_grad_()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    prep = fd.prepare(plan, desc, device=dev, group=GROUP)
    torch.cuda.synchronize()
    row["prepare_ms"] = all_values((time.perf_counter() - t0) * 1e3)

    def sharded():
        o = fd.attention(ql, kl, vl, plan, desc, group=GROUP)
        o.backward(dol)

    def sharded_one_call():
        o = fd.attention(ql, kl, vl, plan, desc, overlap=False, group=GROUP)
        o.backward(dol)
    mine, slowest = step_ms(sharded)
    row["two_gpu_ms"] = slowest
    row["per_rank_step_ms"] = all_values(mine)
    row["phases_ms_per_rank"] = phases(sharded)
    mine, slowest = step_ms(sharded_one_call)
    row["two_gpu_one_call_ms"] = slowest
    row["remote_row_chunks_and_tiles_per_rank"] = plan.remote_tiles().tolist()
    from fragmask.distributed import _merge
    row["gpu_merge"] = "yes" if _merge.FUSED_ERROR is None else _merge.FUSED_ERROR
    if spec.get("variants"):
        row["variants"] = variants(plan, desc, P, dev, ql, kl, vl, dol)
    if not lean:
        # The exchange alone (one-call path): gather the keys, return their gradients.
        gk = torch.randn(1, H, prep.kv_len, D, device=dev, dtype=dt, generator=g)

        def exchange():
            kg, vg = fd.gather_kv(kl, vl, prep, GROUP)
            if kg.requires_grad:
                torch.autograd.backward([kg, vg], [gk, gk])
        mine, slowest = step_ms(exchange)
        row["exchange_fwd_bwd_ms"] = all_values(mine)
    # Each rank's attention alone (keys already gathered): the load balance.
    kg, vg = (t.detach() for t in fd.gather_kv(kl.detach(), vl.detach(), prep, GROUP))
    kg, vg = kg.contiguous().requires_grad_(), vg.contiguous().requires_grad_()
    qd = ql.detach().requires_grad_()

    def local():
        o = fragmask.attention(qd, kg, vg, prep.mask)
        o.backward(dol)
    mine, _ = step_ms(local)
    times = all_values(mine)
    row["per_rank_attention_ms"] = times
    row["attention_slowest_over_mean"] = max(times) / (sum(times) / len(times))
    if not lean:
        # Forward only (inference): the overlapped path against one call.
        with torch.no_grad():
            fo, _ = step_ms(lambda: fd.attention(ql, kl, vl, plan, desc, overlap=True,
                                                 group=GROUP))
            fp, _ = step_ms(lambda: fd.attention(ql, kl, vl, plan, desc, overlap=False,
                                                 group=GROUP))
        row["forward_overlapped_ms"] = max(all_values(fo))
        row["forward_one_call_ms"] = max(all_values(fp))
    # Traffic: K and V bf16 of the chunks each rank sends vs an all-gather of K/V.
    per_token = 2 * H * D * 2
    sent = plan.sent_tokens() * per_token
    allgather = (P - 1) * S_loc * per_token
    row["bytes_sent_per_rank"] = sent.tolist()
    row["bytes_vs_allgather"] = float(sent.sum() / (P * allgather))
    row["busiest_rank_bytes_vs_allgather"] = float(sent.max() / allgather)
    st = prep.mask.stats()
    row["tiles_full_per_rank"] = all_values(st["full"])
    row["tiles_partial_per_rank"] = all_values(st["partial"])
    row["keys_per_rank"] = all_values(prep.kv_len)
    one = torch.tensor([row.get("one_gpu_ms", 0.0)], device="cuda")
    dist.broadcast(one, 0)
    if one.item() > 0:
        row["one_gpu_ms"] = one.item()
        row["two_over_one"] = row["two_gpu_ms"] / row["one_gpu_ms"]
        row["speedup"] = row["one_gpu_ms"] / row["two_gpu_ms"]
    if hasattr(desc, "row_counts"):
        # Masks shared by every head: visible pairs x H x 4D FLOPs forward, 2.5x that
        # backward (the FLOPs the kernels must do, not dense-equivalent), per GPU.
        flops = float(plan.work.sum()) * H * 4 * D * 3.5
        row["visible_pairs"] = float(plan.work.sum())
        row["tflops_per_gpu"] = flops / (row["two_gpu_ms"] * 1e-3) / P / 1e12
        if row.get("one_gpu_ms"):
            row["tflops_one_gpu"] = flops / (row["one_gpu_ms"] * 1e-3) / 1e12
    if spec.get("sdpa_cp"):
        row.update(sdpa_context_parallel(S, H, D, P, dev, g, row["two_gpu_ms"]))
    report[name] = row
    if rank == 0:
        print(f"{name}: " + json.dumps(row), flush=True)
        print(f"SUMMARY {name}: plan {plan.strategy}, imbalance {plan.imbalance:.4f}, "
              f"remote row chunks / tiles per rank "
              f"{row['remote_row_chunks_and_tiles_per_rank']}, GPU merge {row['gpu_merge']}",
              flush=True)
        keys = ("one_gpu_ms", "two_gpu_ms", "two_gpu_one_call_ms", "two_over_one", "speedup",
                "attention_slowest_over_mean", "bytes_vs_allgather",
                "sdpa_context_parallel_ms", "fragmask_over_sdpa_cp_throughput",
                "tflops_per_gpu", "tflops_one_gpu")
        print(f"SUMMARY {name}: " + ", ".join(
            f"{k} {row[k]:.3f}" for k in keys if isinstance(row.get(k), float)), flush=True)
        for vname, v in row.get("variants", {}).items():
            print(f"SUMMARY {name}, {vname}: two_gpu_ms {v['two_gpu_ms']:.3f} "
                  f"({v['strategy']}, remote row chunks / tiles per rank "
                  f"{v['remote_row_chunks_and_tiles_per_rank']})", flush=True)
        print_phases({name: row})
    plan.__dict__.pop("_prepared", None)
    torch.cuda.empty_cache()


def variants(plan, desc, P, dev, ql, kl, vl, dol):
    """The same overlapped step under the planner's previous starts (zigzag,
    contiguous, greedy: no segments), with segments placed by the greedy alone (no
    two-way split search), and with the torch merge in place of the GPU merge kernel:
    what each change of the overlapped path is worth in one run."""
    from fragmask.distributed import _merge, _plan

    def planned(strategies, two_way=True):
        keep = _plan.MAX_TWO_WAY_SEGMENTS
        _plan.MAX_TWO_WAY_SEGMENTS = keep if two_way else 0
        try:
            return fd.plan(desc, P, strategies=strategies)
        finally:
            _plan.MAX_TWO_WAY_SEGMENTS = keep

    out = {}
    for name, vplan, fused in (
            ("previous planner (zigzag, contiguous, greedy)",
             planned(["zigzag", "contiguous", "greedy"]), True),
            ("segments by the greedy alone", planned(None, two_way=False), True),
            ("torch merge", plan, False)):
        _merge.FUSED = fused
        try:
            fd.prepare(vplan, desc, device=dev, group=GROUP)

            def step():
                o = fd.attention(ql, kl, vl, vplan, desc, group=GROUP)
                o.backward(dol)
            _, slowest = step_ms(step)
        finally:
            _merge.FUSED = True
        out[name] = {"two_gpu_ms": slowest, "strategy": vplan.strategy,
                     "imbalance": vplan.imbalance,
                     "remote_row_chunks_and_tiles_per_rank": vplan.remote_tiles().tolist()}
        if vplan is not plan:
            vplan.__dict__.pop("_prepared", None)
    return out


def sdpa_context_parallel(S, H, D, P, dev, g, ours_ms):
    """PyTorch's context_parallel with causal SDPA on the same shapes (forward +
    backward)."""
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel
        import torch.nn.functional as F

        mesh = init_device_mesh("cuda", (P,))
        q, k, v, do = (torch.randn(1, H, S, D, device=dev, dtype=torch.bfloat16,
                                   generator=g) for _ in range(4))
        with context_parallel(mesh, buffers=[q, k, v, do], buffer_seq_dims=[2, 2, 2, 2],
                              no_restore_buffers={q, k, v, do}):
            qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))

            def step():
                o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True)
                o.backward(do)
            _, slowest = step_ms(step)
        return {"sdpa_context_parallel_ms": slowest,
                "fragmask_over_sdpa_cp_throughput": slowest / ours_ms}
    except Exception as e:   # reported, not hidden: the row says what failed
        return {"sdpa_context_parallel_error": f"{type(e).__name__}: {e}"[:300]}


def doc_candidates(desc, P, chunk=128, keep=10):
    """Two-rank plans of an interval mask for the sweep: every subset of its segments
    (cut at document boundaries) for rank 0, filled with the head or tail of one other
    segment, whose visible pairs are within 3% of half; scored by the rank's own tiles
    plus REMOTE_TILE x remote tiles plus REMOTE_CALL per rank with remote rows (tile
    units, ~1 us each on H100). Returns [(label, owner)]: the best by that score and
    the best by tiles alone."""
    from fragmask.distributed import _plan

    n = desc.seqlen // chunk
    m = n // P
    work = np.asarray(desc.chunk_work(chunk), np.float64)
    tiles = np.asarray(desc.chunk_tiles(chunk), np.float64)
    needs = desc.chunk_needs(chunk)
    cross = _plan._cut_costs(needs, n)
    bounds = _plan._cheap_cuts(cross, n)
    k = bounds.size - 1
    if P != 2 or k > 16:
        return []
    a, b = bounds[:-1], bounds[1:]
    cw = np.concatenate(([0.0], np.cumsum(work)))
    W = cw[b] - cw[a]
    size = b - a
    subsets = np.arange(1 << k, dtype=np.int64)
    inc = ((subsets[:, None] >> np.arange(k)) & 1).astype(bool)
    s0, w0 = inc @ size, inc @ W
    half = cw[-1] / 2
    owners = []
    for i in np.flatnonzero(s0 == m):
        if abs(w0[i] - half) <= 0.03 * half:
            owners.append(np.where(np.repeat(inc[i], size), 0, 1))
    for j in range(k):
        idx = np.flatnonzero(~inc[:, j] & (s0 < m) & (m - s0 < size[j]))
        for i in idx:
            r = m - s0[i]
            for head in (True, False):
                lo = a[j] if head else b[j] - r
                pw = w0[i] + cw[lo + r] - cw[lo]
                if abs(pw - half) > 0.03 * half:
                    continue
                owner = np.where(np.repeat(inc[i], size), 0, 1)
                owner[lo:lo + r] = 0
                owners.append(owner)
    scored = []
    for owner in owners:
        remote = _plan._remote_tiles(needs, owner, P)
        t = np.bincount(owner, weights=tiles, minlength=P)       # incl. remote tiles
        own = t - remote[:, 1]
        model = own + 1.4 * remote[:, 1] + 200.0 * (remote[:, 0] > 0)
        scored.append((float(model.max()), float(t.max()), owner))
    out = []
    seen = set()
    for label, key in (("model", 0), ("tiles", 1)):
        for sc in sorted(scored, key=lambda x: x[key])[:keep if key == 0 else 3]:
            h = sc[2].tobytes()
            if h in seen:
                continue
            seen.add(h)
            out.append((f"{label} {sc[0]:.0f}/{sc[1]:.0f}", sc[2]))
    return out


def causal_candidates(S, P, chunk=128):
    n = S // chunk
    idx = np.arange(n)
    out = []
    for segs in (4, 8, 16):
        seg = idx * segs // n
        pat = np.where(seg % 4 < 2, seg % 2, 1 - seg % 2)  # 0 1 1 0 0 1 1 0 ...
        out.append((f"zigzag in {segs}", pat.astype(np.int64)))
    out.append(("zigzag in 4, ranks swapped", 1 - out[0][1]))
    return out


def sweep(name, spec, P, dev, H, D):
    """Measured overlapped steps of other plans of one case."""
    from fragmask.distributed import _plan

    S, desc = spec["S"], spec["desc"]
    g = torch.Generator(device=dev).manual_seed(5)
    dt = torch.bfloat16
    plan0 = fd.plan(desc, P)
    if "document" in name and SWEEP_OWNERS is not None:
        cands = [("planner", plan0.owner, 128)]
        cands += [(lab, np.asarray(o, np.int64), 128) for lab, o in SWEEP_OWNERS.items()]
    elif "document" in name:
        cands = [("planner", plan0.owner, 128),
                 ("planner, tolerance 0.02", fd.plan(desc, P, tolerance=0.02).owner, 128),
                 ("planner, chunk 256", fd.plan(desc, P, chunk=256).owner, 256)]
        cands += [(lab, o, 128) for lab, o in doc_candidates(desc, P)]
        cands += [("chunk 256 " + lab, o, 256)
                  for lab, o in doc_candidates(desc, P, chunk=256, keep=4)]
    else:
        cands = [(lab, o, 128) for lab, o in causal_candidates(S, P)]
    rows = []
    for label, owner, chunk in cands:
        vplan = _plan.Plan(desc, P, chunk, np.asarray(owner, np.int64), label)
        S_loc = vplan.local_seqlen
        ql, kl, vl, dol = (torch.randn(1, H, S_loc, D, device=dev, dtype=dt, generator=g)
                           for _ in range(4))
        for t in (ql, kl, vl):
            t.requires_grad_()
        fd.prepare(vplan, desc, device=dev, group=GROUP)

        def step():
            o = fd.attention(ql, kl, vl, vplan, desc, group=GROUP)
            o.backward(dol)
        mine, slowest = step_ms(step)
        ph = phases(step)
        rt = vplan.remote_tiles().tolist()
        row = {"plan": label, "two_gpu_ms": slowest,
               "per_rank_ms": all_values(mine), "remote_rows_tiles": rt,
               "pairs_imbalance": vplan.imbalance,
               "tiles_per_rank": np.bincount(
                   vplan.owner, weights=desc.chunk_tiles(vplan.chunk),
                   minlength=P).tolist(),
               "phase_sum_per_rank": [sum(v for k, v in t.items()
                                          if k.startswith("compute"))
                                      for t in ph],
               "phases": ph}
        rows.append(row)
        if dist.get_rank() == 0:
            print(f"SWEEP {name} | {label} | "
                  f"{slowest:.3f} ms | per rank "
                  f"{', '.join(f'{x:.3f}' for x in row['per_rank_ms'])} | phases "
                  f"{', '.join(f'{x:.3f}' for x in row['phase_sum_per_rank'])} | "
                  f"remote {rt} | tiles {row['tiles_per_rank']} | "
                  f"pairs imb {vplan.imbalance:.4f}", flush=True)
        vplan.__dict__.pop("_prepared", None)
        del ql, kl, vl, dol
        torch.cuda.empty_cache()
    return rows


def ab(name, spec, P, dev, H, D, base_module, rounds=5):
    """The overlapped step of ``base_module`` (another fragmask.distributed, e.g. the
    main branch's installed beside this one) against this one, alternated over
    ``rounds`` in one process on the same inputs (and this one without its wait for the
    K/V packing, and with tile lists for every part): medians of the slowest rank's
    step."""
    import importlib
    from fragmask.distributed import _attention as A

    S, desc = spec["S"], spec["desc"]
    g = torch.Generator(device=dev).manual_seed(5)
    plan = fd.plan(desc, P)
    ql, kl, vl, dol = (torch.randn(1, H, plan.local_seqlen, D, device=dev,
                                   dtype=torch.bfloat16, generator=g) for _ in range(4))
    for t in (ql, kl, vl):
        t.requires_grad_()
    if base_module == "flags":
        # this build alone: its staged backward against its previous backward, on the
        # default group and on a high-priority NCCL group, and the parts side by side
        hp = HIGH_PRIORITY
        prev = {"STAGED_BACKWARD": False, "CONCURRENT_FORWARD": False}
        staged = {"STAGED_BACKWARD": True, "CONCURRENT_FORWARD": False}
        side = {"STAGED_BACKWARD": True, "CONCURRENT_FORWARD": True}
        variants = [("previous backward", fd, plan, desc, prev, None),
                    ("staged backward", fd, plan, desc, staged, None)]
        if hp is not None:
            variants += [("previous backward, high-priority NCCL", fd, plan, desc, prev,
                          hp),
                         ("staged backward, high-priority NCCL", fd, plan, desc, staged,
                          hp),
                         ("staged, high-priority NCCL, forward parts side by side", fd,
                          plan, desc, side, hp)]
    else:
        base = importlib.import_module(base_module)
        bdesc = _same_description(base, desc)
        # on the run's group (--group), both alike
        variants = [("base", base, base.plan(bdesc, P), bdesc, {}, GROUP),
                    ("this", fd, plan, desc, {}, GROUP)]
        if "document" in name:
            chunked = fd.plan(desc, P, token_cuts=False)
            variants.append(("this, 128-token chunks (no token cuts)", fd, chunked, desc,
                             {}, GROUP))
    for _, mod, vplan, vdesc, _, grp in variants:
        mod.prepare(vplan, vdesc, device=dev, group=grp)
    times = {v[0]: [] for v in variants}
    for _ in range(rounds):
        for label, mod, vplan, vdesc, flags, grp in variants:
            keep = {f: getattr(A, f) for f in flags}
            for f, x in flags.items():
                setattr(A, f, x)
            try:
                def step():
                    o = mod.attention(ql, kl, vl, vplan, vdesc, group=grp)
                    o.backward(dol)
                times[label].append(step_ms(step, *spec.get("steps", STEPS))[1])
            finally:
                for f, x in keep.items():
                    setattr(A, f, x)
    out = {label: {"median_ms": float(np.median(t)), "all_ms": t}
           for label, t in times.items()}
    for _, _, vplan, _, _, _ in variants:
        vplan.__dict__.pop("_prepared", None)
    if dist.get_rank() == 0:
        for label, r in out.items():
            print(f"AB {name} | {label} | median {r['median_ms']:.3f} ms | "
                  f"{', '.join(f'{x:.3f}' for x in r['all_ms'])}", flush=True)
    del ql, kl, vl, dol
    torch.cuda.empty_cache()
    return out


def _same_description(module, desc):
    """``desc`` rebuilt from ``module``'s classes (its planner checks them by type)."""
    if isinstance(desc, fd.Intervals):
        return module.Intervals(desc.lo, desc.hi)
    return desc


def trace(name, spec, P, dev, H, D, out_dir):
    """A torch.profiler trace of two overlapped steps per rank (chrome json)."""
    from torch.profiler import profile, ProfilerActivity

    S, desc = spec["S"], spec["desc"]
    plan = fd.plan(desc, P)
    g = torch.Generator(device=dev).manual_seed(5)
    ql, kl, vl, dol = (torch.randn(1, H, plan.local_seqlen, D, device=dev,
                                   dtype=torch.bfloat16, generator=g) for _ in range(4))
    for t in (ql, kl, vl):
        t.requires_grad_()

    def step():
        o = fd.attention(ql, kl, vl, plan, desc, group=GROUP)
        o.backward(dol)
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(2):
            step()
        torch.cuda.synchronize()
    tag = "doc" if "document" in name else "causal"
    prof.export_chrome_trace(os.path.join(out_dir, f"trace_{tag}_r{dist.get_rank()}.json"))
    plan.__dict__.pop("_prepared", None)
    del ql, kl, vl, dol
    torch.cuda.empty_cache()
    if dist.get_rank() == 0 and spec.get("whole") is not None:
        # the one-GPU step's kernels, for comparison
        mask = spec["whole"]()
        if not mask.has_transposed:
            mask = mask.with_transposed(device=dev)
        mask.to(dev)
        q, k, v, do = (torch.randn(1, H, S, D, device=dev, dtype=torch.bfloat16,
                                   generator=g) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_()

        def one():
            fragmask.attention(q, k, v, mask).backward(do)
        for _ in range(3):
            one()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(2):
                one()
            torch.cuda.synchronize()
        prof.export_chrome_trace(os.path.join(out_dir, f"trace_{tag}_1gpu.json"))
        del q, k, v, do
        torch.cuda.empty_cache()
    dist.barrier()


def print_phases(report):
    for name, row in report.items():
        per_rank = row.get("phases_ms_per_rank")
        if not per_rank:
            continue
        keys = list(dict.fromkeys(k for t in per_rank for k in t))
        print(f"\nphases of one overlapped step, {name} (ms; CUDA events)")
        print(f"  {'stream: phase':<40}" + "".join(f"{'rank ' + str(r):>10}"
                                                   for r in range(len(per_rank))))
        for k in keys:
            print(f"  {k:<40}" + "".join(f"{t.get(k, 0.0):>10.3f}" for t in per_rank))


def print_targets(report):
    """The issue's targets against this run (2 GPUs, bf16, H=16, D=128)."""
    def get(name, key):
        for n, row in report.items():
            if name in n and key in row:
                return row[key]
        return None
    rows = [
        ("64k, 12 causal documents: 2-GPU / 1-GPU time", get("document", "two_over_one"),
         "<=", 0.55),
        ("random 50% (32k): speedup", get("random", "speedup"), ">=", 1.85),
        ("VSA block lists: speedup", get("VSA", "speedup"), ">=", 1.8),
        ("causal 64k: throughput vs context_parallel+SDPA",
         get("causal", "fragmask_over_sdpa_cp_throughput"), ">=", 1.2),
        ("documents: slowest rank's attention / mean",
         get("document", "attention_slowest_over_mean"), "<=", 1.10),
        ("documents: bytes vs K/V all-gather", get("document", "bytes_vs_allgather"),
         "<=", 0.5),
    ]
    print("\ntargets")
    print(f"  {'what':<52}{'measured':>10}  target    verdict")
    for what, value, op, bound in rows:
        if value is None:
            print(f"  {what:<52}{'-':>10}  {op} {bound:<6} not measured")
            continue
        ok = value <= bound if op == "<=" else value >= bound
        print(f"  {what:<52}{value:>10.3f}  {op} {bound:<6} {'met' if ok else 'MISSED'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--sweep", action="store_true",
                    help="also measure other plans and backward modes (documents, causal)")
    ap.add_argument("--trace", default="", help="folder for torch.profiler traces")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --ab")
    ap.add_argument("--doc-seeds", default="",
                    help="comma-separated seeds: more 64k-token document masks (4 to 24 "
                         "causal documents of random lengths)")
    ap.add_argument("--sweep-owners", default="",
                    help="an .npz of {label: chunk owners} (128-token chunks): the document "
                         "sweep's candidates, with the planner's")
    ap.add_argument("--ab", default="",
                    help="another fragmask.distributed module (e.g. a copy of the main "
                         "branch's as fragmask.distributed_base) to alternate with this "
                         "one (documents, causal), or 'flags': this one's staged backward "
                         "against its previous backward")
    ap.add_argument("--lean", action="store_true",
                    help="skip the exchange-alone and forward-only rows; fewer steps")
    ap.add_argument("--group", default="default", choices=("default", "high-priority"),
                    help="the process group of the sharded steps: the default group, or "
                         "fragmask.distributed.high_priority_group() (NCCL streams of "
                         "high priority)")
    args = ap.parse_args()
    global STEPS, GROUP, HIGH_PRIORITY, SWEEP_OWNERS
    if args.sweep_owners:
        with np.load(args.sweep_owners) as z:
            SWEEP_OWNERS = {k: z[k] for k in z.files}
    if args.lean:
        STEPS = (2, 5)
    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=4), device_id=dev)
    P = dist.get_world_size()
    try:
        HIGH_PRIORITY = fd.high_priority_group()
    except Exception as e:      # reported; the default group's rows still run
        print(f"high_priority_group: FAILED {type(e).__name__}: {e}", flush=True)
    GROUP = HIGH_PRIORITY if args.group == "high-priority" else None
    fragmask.warmup(head_dims=(128,), lightning=(), packer_tiles=((128, 128),))
    report = {}
    H, D = 16, 128
    seeds = [int(x) for x in args.doc_seeds.split(",") if x]
    for name, spec in case_list(args.quick, seeds).items():
        if args.only and not any(w in name for w in args.only.split(",")):
            continue
        try:
            run_case(name, spec, H, D, rank, P, dev, report, lean=args.lean)
        except Exception as e:
            if rank == 0:
                print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)
            report[name] = {"error": f"{type(e).__name__}: {e}"[:400]}
        if args.sweep and ("document" in name or name == "causal"):
            try:
                report[name + " sweep"] = sweep(name, spec, P, dev, H, D)
            except Exception as e:
                if rank == 0:
                    print(f"{name} sweep: FAILED {type(e).__name__}: {e}", flush=True)
        if args.ab and ("document" in name or name == "causal"):
            try:
                report[name + " ab"] = ab(name, spec, P, dev, H, D, args.ab,
                                          rounds=args.rounds)
            except Exception as e:
                if rank == 0:
                    print(f"{name} ab: FAILED {type(e).__name__}: {e}", flush=True)
        if args.trace and ("document" in name and "seed" not in name or name == "causal"):
            try:
                trace(name, spec, P, dev, H, D, args.trace)
            except Exception as e:
                if rank == 0:
                    print(f"{name} trace: FAILED {type(e).__name__}: {e}", flush=True)
        if rank == 0 and args.json:         # what finished survives a timeout
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    if rank == 0:
        print(json.dumps(report, indent=1))
        print_targets(report)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
