"""GPU tests of fragmask.distributed under ``torchrun --nproc-per-node 2`` (NCCL, one
GPU per rank): for every mask kind, each rank runs its shard forward and backward and
the gathered o, dq, dk, dv are compared with an fp32 reference over the whole sequence
and with single-GPU fragmask.attention. Found by a plain ``unittest discover`` (no
torchrun, no GPUs), every test is reported as skipped, never as passed."""

import datetime
import importlib.util
import os
import unittest

import numpy as np

import fragmask
import fragmask.distributed as fd

WORLD = int(os.environ.get("WORLD_SIZE", "0"))
READY = False
if importlib.util.find_spec("torch") is not None and WORLD >= 2:
    import torch
    import torch.distributed as dist

    READY = torch.cuda.is_available() and torch.cuda.device_count() >= WORLD
if not READY:
    print("SKIPPED: needs torchrun --nproc-per-node 2 (or more) with a GPU per rank "
          "(tests/test_distributed_gpu.py)")

needs_ranks = unittest.skipUnless(READY, "not under torchrun with a GPU per rank")
TOL = 1e-2


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def math_attention(q, k, v, mask, scale=None):
    """fp32 masked attention; a row with no visible key gives 0 (as fragmask does)."""
    rep = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(rep, dim=1) for t in (k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(s - m) * mask
    z = p.sum(-1, keepdim=True)
    return (p / z.clamp_min(1e-30)) @ v


def docs(rng, S, n):
    cuts = np.sort(rng.choice(np.arange(1, S), size=n - 1, replace=False))
    return np.repeat(np.arange(n), np.diff(np.concatenate(([0], cuts, [S]))))


def cases(S):
    """name -> (description, H, Hk, chunk, block, dtype): the mask kinds of the issue."""
    rng = np.random.default_rng(1234)
    Qb = S // 64
    vsa_idx = np.stack([np.stack([rng.permutation(Qb)[:max(1, Qb // 10)] for _ in range(Qb)])
                        for _ in range(4)])
    vsa_num = rng.integers(1, vsa_idx.shape[-1] + 1, size=(4, Qb))
    topk = np.stack([np.stack([rng.permutation(S)[:64] for _ in range(S)]) for _ in range(4)])
    dense = rng.random((4, S, S)) < 0.5
    bf16, f16 = torch.bfloat16, torch.float16
    return {
        "document-causal GQA": (fd.Intervals.documents(docs(rng, S, 5)), 4, 2, 128,
                                (128, 128), bf16),
        "causal": (fd.Intervals.causal(S), 4, 4, 128, (128, 128), bf16),
        # group 4: the causal parts' backward takes group slices (docs/backward.md, "GQA")
        "causal GQA 8:2": (fd.Intervals.causal(S), 8, 2, 128, (128, 128), bf16),
        "sliding window fp16": (fd.Intervals.causal(S, window=(700, 0)), 4, 2, 128,
                                (128, 128), f16),
        "random 50% per head": (fd.DenseRows(mask=dense), 4, 1, 128, (128, 128), bf16),
        "top-k per head": (fd.TopK(topk), 4, 2, 128, (128, 128), bf16),
        "VSA block lists per head": (
            fd.BlockLists(vsa_idx, vsa_num, rng.integers(32, 65, size=Qb)), 4, 2, 128,
            (128, 128), bf16),
        "64-token tiles": (fd.BlockLists(vsa_idx, vsa_num), 4, 2, 64, (64, 64), bf16),
        # MHA: the backward parts pair their key blocks (docs/backward.md, "Paired key blocks")
        "64-token tiles MHA": (fd.BlockLists(vsa_idx, vsa_num), 4, 4, 128, (64, 64), bf16),
    }


@needs_ranks
class ContextParallel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not dist.is_initialized():
            rank = int(os.environ["RANK"])
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
            dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=3),
                                    device_id=torch.device("cuda", torch.cuda.current_device()))
        cls.rank, cls.P = dist.get_rank(), dist.get_world_size()
        cls.dev = torch.device("cuda", torch.cuda.current_device())

    def gather(self, plan, t, dim=2):
        parts = [torch.empty_like(t) for _ in range(self.P)]
        dist.all_gather(parts, t.contiguous())
        return plan.unshard(parts, dim=dim)

    def run_case(self, name, desc, H, Hk, chunk, block, dtype, S, layout="bhsd",
                 group=None, token_cuts=True):
        B, D = 1, 128
        plan = fd.plan(desc, self.P, chunk=chunk, token_cuts=token_cuts)
        g = torch.Generator(device=self.dev).manual_seed(99)
        q = torch.randn(B, H, S, D, device=self.dev, dtype=dtype, generator=g)
        k, v = (torch.randn(B, Hk, S, D, device=self.dev, dtype=dtype, generator=g)
                for _ in range(2))
        do = torch.randn(B, H, S, D, device=self.dev, dtype=dtype, generator=g)
        dense = torch.from_numpy(desc.dense()).to(self.dev)        # [Hm, S, S]
        # fp32 reference over the whole sequence
        ref = [t.float().requires_grad_() for t in (q, k, v)]
        o32 = math_attention(*ref, dense[None])
        o32.backward(do.float())
        want = (o32.detach(),) + tuple(t.grad for t in ref)
        # single-GPU fragmask over the whole sequence
        whole = fragmask.Mask.from_dense(dense[None].contiguous(), block=block,
                                         transposed=True)
        one = [t.clone().requires_grad_() for t in (q, k, v)]
        o1, lse1 = fragmask.attention(*one, whole, return_lse=True)
        o1.backward(do)
        single = (o1.detach(),) + tuple(t.grad for t in one)
        # this rank's shard
        shard = [plan.shard(t, self.rank, dim=2).detach().clone().requires_grad_()
                 for t in (q, k, v)]
        args = shard
        if layout == "bshd":
            args = [t.transpose(1, 2) for t in shard]
        o, lse = fd.attention(*args, plan, block=block, return_lse=True, layout=layout,
                              group=group)
        if layout == "bshd":
            o = o.transpose(1, 2)
        o.backward(plan.shard(do, self.rank, dim=2))
        got = [self.gather(plan, t) for t in (o.detach(),) + tuple(t.grad for t in shard)]
        got_lse = self.gather(plan, lse, dim=2)
        # the one-call path (one exchange, one attention call), forward and backward
        again = [t.detach().clone().requires_grad_() for t in shard]
        o2 = fd.attention(*again, plan, block=block, overlap=False, group=group)
        o2.backward(plan.shard(do, self.rank, dim=2))
        one_call = [self.gather(plan, t) for t in (o2.detach(),) + tuple(t.grad for t in again)]
        # forward only (no autograd): the overlapped path against the one call
        with torch.no_grad():
            ov = fd.attention(*[t.detach() for t in shard], plan, block=block, overlap=True,
                              group=group)
            plain = fd.attention(*[t.detach() for t in shard], plan, block=block, group=group,
                                 overlap=False)
        ov_all = self.gather(plan, ov)
        # every collective is behind us: a failed check below cannot strand another rank
        for what, a, b, c, d in zip(("o", "dq", "dk", "dv"), got, want, single, one_call):
            self.assertTrue(torch.isfinite(a).all(), f"{name}: {what} not finite")
            self.assertLess(rel_err(a, b), TOL, f"{name}: {what} against fp32")
            self.assertLess(rel_err(a, c), TOL, f"{name}: {what} against one GPU")
            self.assertLess(rel_err(d, b), TOL, f"{name}: {what} (one call) against fp32")
        fin = torch.isfinite(lse1)
        self.assertTrue(torch.equal(fin, torch.isfinite(got_lse)), name)
        self.assertLess((got_lse[fin] - lse1[fin]).abs().max().item(), 1e-2, name)
        self.assertLess(rel_err(ov_all, want[0]), TOL, f"{name}: overlapped")
        self.assertLess(rel_err(ov, plain), 5e-3, f"{name}: overlapped vs one call")
        from fragmask.distributed import _merge
        self.assertIsNone(_merge.FUSED_ERROR, name)       # the GPU merge kernel ran
        return {w: (rel_err(a, b), rel_err(a, c), rel_err(d, b))
                for w, a, b, c, d in zip(("o", "dq", "dk", "dv"), got, want, single,
                                         one_call)}

    def test_forward_and_backward_match_fp32_and_one_gpu_for_every_mask_kind(self):
        S = 4096
        for name, (desc, H, Hk, chunk, block, dtype) in cases(S).items():
            with self.subTest(mask=name):
                errs = self.run_case(name, desc, H, Hk, chunk, block, dtype, S)
                if self.rank == 0:
                    print(f"  {name}: " + ", ".join(
                        f"{w} {a:.1e} (vs 1 GPU {b:.1e}, one call {c:.1e})"
                        for w, (a, b, c) in errs.items()), flush=True)

    def test_the_gpu_merge_equals_the_f64_merge_at_all_rows_a_slice_and_an_index(self):
        from fragmask.distributed import _merge

        g = torch.Generator(device=self.dev).manual_seed(7 + self.rank)
        B, H, S, R = 2, 3, 1000, 300
        for dtype, D in ((torch.bfloat16, 128), (torch.float16, 64)):
            o = torch.randn(B, H, S, D, device=self.dev, dtype=dtype, generator=g)
            lse = torch.randn(B, H, S, device=self.dev, generator=g) * 4
            lse[:, :, ::7] = float("-inf")          # rows the running part does not see
            o[:, :, ::7] = 0
            idx = torch.randperm(S, device=self.dev, generator=g)[:R]
            for rows in (None, slice(123, 123 + R), idx):
                with self.subTest(dtype=str(dtype), rows=type(rows).__name__):
                    n = S if rows is None else R
                    o_p = torch.randn(B, H, n, D, device=self.dev, dtype=dtype, generator=g)
                    lse_p = torch.randn(B, H, n, device=self.dev, generator=g) * 4
                    lse_p[:, :, ::5] = float("-inf")
                    o_p[:, :, ::5] = 0
                    sel = (torch.arange(S, device=self.dev) if rows is None else
                           torch.arange(S, device=self.dev)[rows])
                    want_o, want_l = fd.merge_states_numpy(
                        [o[:, :, sel].double().cpu().numpy(), o_p.double().cpu().numpy()],
                        [lse[:, :, sel].double().cpu().numpy(),
                         lse_p.double().cpu().numpy()])
                    a_o, a_l = o.clone(), lse.clone()
                    _merge.merge_into_(a_o, a_l, o_p, lse_p, rows)
                    self.assertIsNone(_merge.FUSED_ERROR)
                    b_o, b_l = o.clone(), lse.clone()
                    _merge.merge_into_torch_(b_o, b_l, o_p, lse_p, rows)
                    got_o, got_l = a_o[:, :, sel].double().cpu(), a_l[:, :, sel].double().cpu()
                    want_o, want_l = torch.from_numpy(want_o), torch.from_numpy(want_l)
                    ulp = 2.0 ** (-8 if dtype == torch.bfloat16 else -11)
                    self.assertLessEqual((got_o - want_o).abs().max().item(),
                                         ulp * want_o.abs().max().item())
                    fin = torch.isfinite(want_l)
                    self.assertTrue(torch.equal(torch.isfinite(got_l), fin))
                    self.assertLess((got_l[fin] - want_l[fin]).abs().max().item(), 1e-4)
                    self.assertTrue((got_o[~fin] == 0).all())
                    # rows the partial does not name are untouched
                    keep = torch.ones(S, dtype=torch.bool, device=self.dev)
                    keep[sel] = False
                    self.assertTrue(torch.equal(a_o[:, :, keep], o[:, :, keep]))
                    self.assertTrue(torch.equal(a_l[:, :, keep], lse[:, :, keep]))
                    # and the torch path agrees within one rounding
                    self.assertLessEqual((a_o.double() - b_o.double()).abs().max().item(),
                                         2 * ulp * o_p.abs().max().item() + 1e-6)

    def test_with_and_without_waiting_for_the_packing_match_fp32(self):
        from fragmask.distributed import _attention

        S = 4096
        picked = cases(S)
        keep = _attention.WAIT_FOR_PACKING
        for wait in (True, False):
            for name in ("document-causal GQA", "causal", "top-k per head"):
                desc, H, Hk, chunk, block, dtype = picked[name]
                with self.subTest(wait=wait, mask=name):
                    _attention.WAIT_FOR_PACKING = wait
                    try:
                        self.run_case(name, desc, H, Hk, chunk, block, dtype, S)
                    finally:
                        _attention.WAIT_FOR_PACKING = keep

    def test_the_staged_and_the_previous_backward_match_fp32(self):
        from fragmask.distributed import _attention

        S = 4096
        picked = cases(S)
        A = _attention
        names = ("STAGED_BACKWARD", "STAGED_ALL_ROWS", "CONCURRENT_FORWARD")
        keep = [getattr(A, n) for n in names]
        # staged (each part on its rows), staged with every part over all the rank's
        # rows, staged with the forward's parts side by side on two streams, the
        # previous backward
        for flags in ((True, False, False), (True, True, False), (True, False, True),
                      (False, False, False)):
            for name in ("document-causal GQA", "causal", "causal GQA 8:2", "top-k per head"):
                desc, H, Hk, chunk, block, dtype = picked[name]
                with self.subTest(flags=flags, mask=name):
                    for n, f in zip(names, flags):
                        setattr(A, n, f)
                    try:
                        self.run_case(name, desc, H, Hk, chunk, block, dtype, S)
                    finally:
                        for n, f in zip(names, keep):
                            setattr(A, n, f)

    def test_a_high_priority_group_matches_fp32(self):
        group = fd.high_priority_group()
        S = 4096
        picked = cases(S)
        for name in ("document-causal GQA", "causal"):
            desc, H, Hk, chunk, block, dtype = picked[name]
            with self.subTest(mask=name):
                self.run_case(name, desc, H, Hk, chunk, block, dtype, S, group=group)

    def test_documents_planned_in_tokens_and_in_128_token_chunks_match_fp32(self):
        # The document masks above are planned in 1-token chunks (documents cut at their
        # own boundaries); the same masks in 128-token chunks, and a check that the
        # token plan was the one run.
        for S, n in ((4096, 5), (8192, 12)):
            desc = fd.Intervals.documents(docs(np.random.default_rng(S), S, n))
            for token_cuts in (True, False):
                with self.subTest(S=S, token_cuts=token_cuts):
                    plan = fd.plan(desc, self.P, token_cuts=token_cuts)
                    if not token_cuts:
                        self.assertEqual(plan.chunk, 128)
                    self.run_case(f"documents {S}, chunk {plan.chunk}", desc, 4, 2, 128,
                                  (128, 128), torch.bfloat16, S, token_cuts=token_cuts)

    def test_bshd_layout(self):
        desc = fd.Intervals.documents(docs(np.random.default_rng(3), 2048, 3))
        self.run_case("bshd", desc, 4, 2, 128, (128, 128), torch.bfloat16, 2048,
                      layout="bshd")

    def test_a_mask_the_plan_was_not_made_for_is_refused(self):
        S = 2048
        plan = fd.plan(fd.Intervals.documents(docs(np.random.default_rng(3), S, 8)), self.P)
        q = torch.randn(1, 2, S // self.P, 128, device=self.dev, dtype=torch.bfloat16)
        with self.assertRaises(ValueError):
            fd.attention(q, q, q, plan, fd.Intervals.causal(S))
        with self.assertRaises(ValueError):
            fd.attention(q[:, :, :-1], q, q, plan)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        if READY and dist.is_initialized():
            dist.destroy_process_group()
