"""GPU tests of the torch ops (an H100 with torch). Without torch or a CUDA device every
test is reported as skipped, never as passed."""

import importlib.util
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import numpy as np

import fragmask
from fragmask import Mask

HAVE_CUDA = False
if importlib.util.find_spec("torch") is not None:
    import torch

    HAVE_CUDA = torch.cuda.is_available()
if not HAVE_CUDA:
    print("SKIPPED: no torch with a CUDA device (tests/test_gpu.py)")

needs_gpu = unittest.skipUnless(HAVE_CUDA, "no torch with a CUDA device")


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


@needs_gpu
class AttentionTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        fragmask.warmup(head_dims=(64, 128))

    def qkv(self, B, H, Hk, Sq, Sk, D, seed=0, layout="bhsd"):
        g = torch.Generator(device="cuda").manual_seed(seed)
        shapes = [(B, H, Sq, D), (B, Hk, Sk, D), (B, Hk, Sk, D)]
        ts = [torch.randn(s, device="cuda", dtype=torch.bfloat16, generator=g) for s in shapes]
        if layout == "bshd":
            ts = [t.transpose(1, 2).contiguous() for t in ts]
        return ts

    @staticmethod
    def counting_ops(calls):
        """The registered ops, the attention op wrapped to append to `calls` per call (the
        value for `_ops._ops` in tests that check which path a call took)."""
        from fragmask import _ops

        attention_op, lightning_op = _ops._register()

        def counting(*args):
            calls.append(1)
            return attention_op(*args)

        return counting, lightning_op

    def sdpa(self, q, k, v, mask=None, causal=False, layout="bhsd"):
        if layout == "bshd":
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        rep = q.shape[1] // k.shape[1]
        k, v = (t.repeat_interleave(rep, dim=1) for t in (k, v))
        o = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), attn_mask=mask, is_causal=causal)
        return o.transpose(1, 2) if layout == "bshd" else o

    def test_matches_sdpa_for_every_mask_source_and_both_layouts(self):
        B, H, Hk, Sq, Sk, D = 2, 4, 2, 300, 260, 128
        g = torch.Generator(device="cuda").manual_seed(7)
        dense = torch.rand(B, H, Sq, Sk, device="cuda", generator=g) < 0.5
        dense[..., 0] = True  # every row sees a key (SDPA gives NaN on empty rows)
        idx = torch.stack([torch.randperm(Sk, device="cuda")[:32] for _ in range(Sq)])
        topk = torch.zeros(Sq, Sk, dtype=torch.bool, device="cuda")
        topk.scatter_(1, idx, True)
        causal = torch.ones(Sq, Sk, dtype=torch.bool, device="cuda").tril()
        masks = {
            "dense": (Mask.from_dense(dense.cpu()), dense),
            "dense packed on the GPU": (Mask.from_dense(dense), dense),
            "topk": (Mask.from_topk(idx.cpu(), Sk), topk),
            "predicate": (Mask.from_predicate("causal@top-left", Sq, Sk), causal),
        }
        for layout in ("bhsd", "bshd"):
            q, k, v = self.qkv(B, H, Hk, Sq, Sk, D, layout=layout)
            for name, (m, ref_mask) in masks.items():
                out = fragmask.attention(q, k, v, m, layout=layout)
                ref = self.sdpa(q, k, v, ref_mask, layout=layout)
                self.assertLess(rel_err(out, ref), 1e-2, f"{name} {layout}")
            out = fragmask.attention(q, k, v, causal=True, layout=layout)
            self.assertLess(rel_err(out, self.sdpa(q, k, v, causal=True, layout=layout)), 1e-2)
            out = fragmask.attention(q, k, v, layout=layout)
            self.assertLess(rel_err(out, self.sdpa(q, k, v, layout=layout)), 1e-2)

    def test_eager_fast_path_equals_the_registered_op_and_yields_to_it(self):
        from fragmask import _ops

        B, H, Hk, Sq, Sk, D = 2, 4, 2, 300, 260, 128
        dense = torch.rand(Sq, Sk, device="cuda") < 0.3
        dense[:, 0] = True
        m = Mask.from_dense(dense)
        saved = _ops._ops
        for layout in ("bhsd", "bshd"):
            q, k, v = self.qkv(B, H, Hk, Sq, Sk, D, layout=layout)
            cases = [dict(mask=m), dict(causal=True), dict(window=(40, 3), scale=0.07),
                     dict(return_lse=True)]
            for kw in cases:
                kw = dict(kw, layout=layout)
                op = _ops._attention_op_path(q, k, v, kw.get("mask"), kw.get("causal", False),
                                             kw.get("window"), kw.get("scale"),
                                             kw.get("return_lse", False), layout)

                def broken():
                    raise AssertionError("the registered op was called")

                _ops._ops = (broken, broken)  # the fast path must not reach the op
                try:
                    fast = fragmask.attention(q, k, v, **kw)
                finally:
                    _ops._ops = saved
                for a, b in zip(fast if isinstance(fast, tuple) else (fast,),
                                op if isinstance(op, tuple) else (op,)):
                    self.assertEqual(a.shape, b.shape, f"{kw}")
                    self.assertEqual(a.stride(), b.stride(), f"{kw}")
                    self.assertTrue(torch.equal(a, b), f"{kw}")
        # Autograd through the inputs and dispatch modes take the registered op.
        q, k, v = self.qkv(1, 2, 2, 128, 128, 64)
        calls = []
        _ops._ops = self.counting_ops(calls)
        try:
            fragmask.attention(q, k, v)
            self.assertEqual(calls, [])
            qg = q.clone().requires_grad_()
            # autograd: the eager autograd.Function, not the registered op
            fragmask.attention(qg, k, v).sum().backward()
            self.assertEqual(calls, [])
            self.assertIsNotNone(qg.grad)
            with torch.no_grad():
                fragmask.attention(q.clone().requires_grad_(), k, v)
            self.assertEqual(calls, [])
            _ops._FAST = False      # the switch the tests use to compare both paths
            try:
                fragmask.attention(qg, k, v).sum().backward()
            finally:
                _ops._FAST = True
            self.assertEqual(len(calls), 1)
            from torch.utils._python_dispatch import TorchDispatchMode

            class Passthrough(TorchDispatchMode):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    return func(*args, **(kwargs or {}))

            with Passthrough():
                fragmask.attention(q, k, v)
            self.assertEqual(len(calls), 2)
            with Passthrough():     # a dispatch mode with autograd: the registered op
                fragmask.attention(qg, k, v)
            self.assertEqual(len(calls), 3)
        finally:
            _ops._ops = saved

    def test_default_device_mode_keeps_the_fast_path_and_its_results(self):
        """torch.set_default_device and `with torch.device(...)` push a DeviceContext
        function mode; attention (with and without autograd), decode and lightning_decode
        still skip the registered ops under it and give the op path's results, as the
        plans' run does. Any other function mode still takes the registered op."""
        from fragmask import _ops
        from torch.overrides import TorchFunctionMode

        q, k, v = self.qkv(1, 2, 2, 256, 256, 128)
        m = Mask.from_predicate("causal", 256)
        via_op = _ops._attention_op_path(q, k, v, m, False, None, None, False, "bhsd")
        dq1 = torch.randn(1, 1, 8, 128, device="cuda", dtype=torch.bfloat16)
        kc = torch.randn(1, 256, 8, 128, device="cuda", dtype=torch.bfloat16)
        dec_ref = fragmask.decode(dq1, kc, kc)
        lq, lk, lv = (torch.randn(1, 2, 1, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        kv0, slope = torch.randn(1, 2, 64, 64, device="cuda"), torch.rand(2, device="cuda")
        kv_ref = kv0.clone()
        lin_ref = fragmask.lightning_decode(lq, lk, lv, kv_ref, slope)
        plan = fragmask.AttentionPlan(q, k, v, m.to("cuda"))
        dplan = fragmask.DecodePlan(dq1, kc, kc)
        plan_ref, dplan_ref = plan.run(q, k, v), dplan.run(dq1, kc, kc)
        saved = (_ops._ops, _ops._register_decode)

        def broken(*args):
            raise AssertionError("the registered op was called")

        class Other(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        # torch.set_default_device(None) removes the mode; a device would leave one behind.
        had_default = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not None
        previous = torch.get_default_device() if had_default else None
        try:
            for scope in ("set_default_device", "with torch.device"):
                entered = None
                if scope == "set_default_device":
                    torch.set_default_device("cuda")
                else:
                    entered = torch.device("cuda")
                    entered.__enter__()
                try:
                    self.assertTrue(torch._C._is_torch_function_mode_enabled(), scope)
                    _ops._ops, _ops._register_decode = (broken, broken), None
                    try:
                        fast = fragmask.attention(q, k, v, m)
                        qg = q.clone().requires_grad_()
                        fragmask.attention(qg, k, v, m).sum().backward()
                        dec = fragmask.decode(dq1, kc, kc)
                        kv = kv0.clone()
                        lin = fragmask.lightning_decode(lq, lk, lv, kv, slope)
                        ran, dran = plan.run(q, k, v), dplan.run(dq1, kc, kc)
                    finally:
                        _ops._ops, _ops._register_decode = saved
                    self.assertTrue(torch.equal(ran, plan_ref) and torch.equal(dran, dplan_ref), scope)
                    self.assertTrue(torch.equal(fast, via_op), scope)
                    self.assertIsNotNone(qg.grad, scope)
                    self.assertTrue(torch.equal(dec, dec_ref), scope)
                    self.assertTrue(torch.equal(lin, lin_ref) and torch.equal(kv, kv_ref), scope)
                    # Another function mode on top of it: the registered op, same result.
                    calls = []
                    _ops._ops = self.counting_ops(calls)
                    try:
                        with Other():
                            other = fragmask.attention(q, k, v, m)
                    finally:
                        _ops._ops = saved[0]
                    self.assertEqual(len(calls), 1, scope)
                    self.assertTrue(torch.equal(other, via_op), scope)
                finally:
                    if entered is not None:
                        entered.__exit__(None, None, None)
                    torch.set_default_device(previous)
        finally:
            _ops._ops, _ops._register_decode = saved

    def test_64_token_tile_masks_reach_the_op(self):
        B, H, Sq, Sk, D = 1, 2, 200, 330, 128
        q, k, v = self.qkv(B, H, H, Sq, Sk, D)
        dense = torch.rand(Sq, Sk, device="cuda") < 0.4
        dense[:, 0] = True
        m = Mask.from_dense(dense, block=(64, 64))
        self.assertEqual((m.block, m.warpgroups), ((64, 64), 1))
        self.assertEqual(m, Mask.from_dense(dense.cpu(), block=(64, 64)))
        out = fragmask.attention(q, k, v, m)
        self.assertLess(rel_err(out, self.sdpa(q, k, v, dense)), 1e-2)
        # The same mask in [B, S, H, D] layout and through torch.compile.
        bshd = fragmask.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), m, layout="bshd")
        self.assertLess(rel_err(bshd.transpose(1, 2), out), 1e-3)

    def test_head_dim_masks_run_their_head_dims_tile_and_match_sdpa(self):
        # Mask.from_*(head_dim=): 192x128 over 3 warpgroups at head dim 64, 128x80 at 256,
        # packed on the GPU and on the CPU alike; the forward runs that tile's kernel.
        for D, tile in ((64, ((192, 128), 3)), (128, ((128, 128), 2)), (256, ((128, 80), 2))):
            with self.subTest(head_dim=D):
                B, H, Sq, Sk = 1, 2, 300, 420
                q, k, v = self.qkv(B, H, H, Sq, Sk, D, seed=D)
                dense = torch.rand(Sq, Sk, device="cuda") < 0.5
                dense[:, 0] = True
                m = Mask.from_dense(dense, head_dim=D)
                self.assertEqual((m.block, m.warpgroups), tile)
                self.assertEqual(m, Mask.from_dense(dense.cpu(), head_dim=D))
                out = fragmask.attention(q, k, v, m)
                self.assertLess(rel_err(out, self.sdpa(q, k, v, dense)), 1e-2)

    def test_masks_of_another_tile_or_encoding_are_refused_before_launch(self):
        q, k, v = self.qkv(1, 2, 2, 256, 256, 128)
        for m in (Mask.from_predicate("causal", 256, block=(64, 128)),
                  Mask.from_predicate("causal", 256, encoding="quad-lane")):
            with self.assertRaisesRegex(ValueError, "not supported|the attention kernel needs"):
                fragmask.attention(q, k, v, m)

    def test_fp16_matches_sdpa_for_every_mask_source_and_both_layouts(self):
        B, H, Hk, Sq, Sk, D = 1, 4, 2, 200, 330, 128
        q, k, v = (t.half() for t in self.qkv(B, H, Hk, Sq, Sk, D))
        dense = torch.rand(Sq, Sk, device="cuda") < 0.4
        dense[:, 0] = True
        kr, vr = (t.repeat_interleave(H // Hk, 1) for t in (k, v))
        for m in (None, Mask.from_dense(dense), Mask.from_dense(dense, block=(64, 64))):
            out = fragmask.attention(q, k, v, m)
            self.assertEqual(out.dtype, torch.float16)
            ref = torch.nn.functional.scaled_dot_product_attention(
                q.float(), kr.float(), vr.float(), attn_mask=None if m is None else dense)
            self.assertLess(rel_err(out, ref), 1e-2)
            bshd = fragmask.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), m,
                                      layout="bshd")
            self.assertLess(rel_err(bshd.transpose(1, 2), out), 1e-3)
        causal = fragmask.attention(q, k, v, causal=True)
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kr.float(), vr.float(),
                                                               is_causal=True)
        self.assertLess(rel_err(causal, ref), 1e-2)

    def test_outputs_equal_the_clis_on_the_same_files(self):
        # The same q, k, v (.npy float32 of bf16 values, exact) and the same mask file give
        # the same O bits through the op and through `fragmask attention`, whichever layout
        # the CLI writes O in (--out-layout; its --out file is [B, H, S, D] either way) and
        # the op is called with.
        repo = Path(__file__).resolve().parents[3]
        binary = Path(os.environ.get("FRAGMASK_BIN", repo / "target" / "debug" / "fragmask"))
        if not binary.is_file():
            self.skipTest(f"{binary} not built (set FRAGMASK_BIN)")
        B, H, Hk, Sq, Sk, D = 1, 2, 1, 190, 260, 64
        q, k, v = self.qkv(B, H, Hk, Sq, Sk, D, seed=5)
        dense = torch.rand(Sq, Sk, device="cuda") < 0.3
        for block in ((128, 128), (64, 64)):
            m = Mask.from_dense(dense.cpu(), block=block)
            with tempfile.TemporaryDirectory() as d:
                d = Path(d)
                for name, t in (("q", q), ("k", k), ("v", v)):
                    np.save(d / f"{name}.npy", t.float().cpu().numpy())
                m.save(d / "m.safetensors")
                cli = {}
                for layout in ("bhsd", "bshd"):
                    subprocess.run([str(binary), "attention", "--q", str(d / "q.npy"),
                                    "--k", str(d / "k.npy"), "--v", str(d / "v.npy"),
                                    "--mask", str(d / "m.safetensors"), "--scale", "0.125",
                                    "--out-layout", layout, "--out", str(d / f"o_{layout}.npy")],
                                   check=True, capture_output=True)
                    cli[layout] = torch.from_numpy(np.load(d / f"o_{layout}.npy")).cuda()
            out = fragmask.attention(q, k, v, m.to("cuda"), scale=0.125)
            for layout, o in cli.items():
                self.assertTrue(torch.equal(out.float(), o), f"block {block}, CLI {layout}")
            bshd = fragmask.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                      m.to("cuda"), scale=0.125, layout="bshd")
            self.assertTrue(torch.equal(bshd.transpose(1, 2).float(), cli["bshd"]), f"block {block}")

    def test_lse_and_errors(self):
        q, k, v = self.qkv(1, 2, 2, 128, 128, 64)
        out, lse = fragmask.attention(q, k, v, return_lse=True)
        s = (q.float() @ k.float().transpose(-1, -2)) * 64 ** -0.5
        self.assertLess(rel_err(lse, torch.logsumexp(s, -1)), 1e-4)
        with self.assertRaises(TypeError):
            fragmask.attention(q.float(), k.float(), v.float())
        with self.assertRaises(TypeError):
            fragmask.attention(q.half(), k, v)   # mixed dtypes
        with self.assertRaises(ValueError):
            fragmask.attention(q, k, v, Mask.from_predicate("causal", 64, 64))

    def test_opcheck(self):
        q, k, v = self.qkv(1, 2, 1, 130, 200, 64)
        m = Mask.from_predicate("window=64:0", 130, 200)
        fragmask.attention(q, k, v, m)  # registers the op, uploads the lists
        from fragmask._ops import _device_lists, _register
        attention_op, lightning_op = _register()
        lists = _device_lists(torch, m, q.device)
        meta = list(m._meta)
        none6 = (None,) * 6
        torch.library.opcheck(attention_op, (q, k, v, *lists, *none6, meta, False, [-1, -1],
                                             0.125, 0, False))
        torch.library.opcheck(attention_op, (q, k, v, *none6, *none6, [], True, [-1, -1],
                                             0.125, 0, True))
        B, H, D = 2, 4, 96
        args = [torch.randn(B, H, 1, D, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        kv = torch.randn(B, H, D, D, device="cuda")
        slope = torch.rand(H, device="cuda")
        torch.library.opcheck(lightning_op, (*args, kv, slope))

    def test_torch_compile_fullgraph_traces_through(self):
        q, k, v = self.qkv(1, 4, 4, 256, 256, 128)
        m = Mask.from_predicate("causal", 256, 256).to("cuda")

        def f(q, k, v):
            return fragmask.attention(q * 1.0, k, v, m) + 1

        compiled = torch.compile(f, fullgraph=True)
        self.assertEqual(rel_err(compiled(q, k, v), f(q, k, v)), 0.0)

    def test_cuda_graph_captures_and_replays(self):
        q, k, v = self.qkv(1, 4, 4, 256, 256, 128)
        m = Mask.from_predicate("causal", 256, 256)
        fragmask.attention(q, k, v, m)  # lists on the device, kernels loaded
        static = [t.clone() for t in (q, k, v)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fragmask.attention(*static, m)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fragmask.attention(*static, m)
        for seed in (1, 2):
            new = self.qkv(1, 4, 4, 256, 256, 128, seed=seed)
            for dst, src in zip(static, new):
                dst.copy_(src)
            graph.replay()
            torch.cuda.synchronize()
            self.assertEqual(rel_err(out, fragmask.attention(*new, m)), 0.0)


    def test_a_host_mask_first_planned_under_capture_runs_the_row_order_copied_with_it(self):
        # A host-packed mask whose rows differ (upper triangle: row block m visits the key
        # tiles from m on) has a row order the grid does not run by itself. mask.to(device)
        # copies it beside the lists, so a plan first made while a CUDA graph captures
        # (here: a batch size the warm-up did not plan), which may upload nothing, runs it
        # all the same; the graph replays to the eager result.
        from fragmask import _ops

        S = 512
        dense = torch.ones(S, S, dtype=torch.bool).triu()
        m = Mask.from_dense(dense).to("cuda")
        q, k, v = self.qkv(1, 4, 4, S, S, 128)
        self.assertTrue(fragmask.AttentionPlan(q, k, v, m).largest_first)
        fragmask.attention(q, k, v, m)     # the kernel loaded
        static = [torch.cat([t, t]) for t in (q, k, v)]    # batch 2: a plan not made yet
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            out = fragmask.attention(*static, m)
        planned = [e[_ops._HANDLE].largest_first for key, e in _ops._fwd_plans.items()
                   if key[0] == static[0].shape and key[8] == m._meta[8]]
        self.assertEqual(planned, [True])
        for seed in (1, 2):
            new = [torch.cat([t, t]) for t in self.qkv(1, 4, 4, S, S, 128, seed=seed)]
            for dst, src in zip(static, new):
                dst.copy_(src)
            graph.replay()
            torch.cuda.synchronize()
            self.assertEqual(rel_err(out, fragmask.attention(*new, m)), 0.0)
        # The transposed lists' key-tile order is copied with them too: the backward's plan
        # runs it (key tile n is visited by the query tiles up to n: largest last).
        mt = Mask.from_dense(dense, transposed=True).to("cuda")
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        out = fragmask.attention(qq, kk, vv, mt, deterministic=False)
        torch.autograd.grad(out, (qq, kk, vv), torch.randn_like(out))
        modes = {h.largest_first for key, e in _ops._fwd_plans.items() if key[8] == mt._meta[8]
                 for h in e[_ops._BWD][6].values()}
        self.assertEqual(modes, {True})

    def test_few_row_blocks_against_many_keys_split_the_keys_and_match_sdpa(self):
        # Write-up 002's decode in small: one 64-row block per head against 8192 keys, each
        # head keeping 13 of its 128 64-token key blocks: the forward's planner splits each
        # row block's keys over several CTAs and the combine merges them (split-KV).
        B, H, Sq, Sk, D = 1, 4, 64, 8192, 128
        nb = Sk // 64
        g = torch.Generator().manual_seed(5)
        idx = torch.rand(H, 1, nb, generator=g).topk(13, dim=-1).indices.sort(dim=-1).values
        m = Mask.from_blocks(idx.int(), torch.full((H, 1), 13, dtype=torch.int32),
                             seqlen_q=Sq, seqlen_k=Sk, block=(64, 64), warpgroups=1)
        blocks = torch.zeros(H, nb, dtype=torch.bool)
        for h in range(H):
            blocks[h, idx[h, 0]] = True
        dense = blocks.repeat_interleave(64, 1)[None, :, None, :].expand(B, H, Sq, Sk).cuda()
        for layout in ("bhsd", "bshd"):
            q, k, v = self.qkv(B, H, H, Sq, Sk, D, seed=9, layout=layout)
            ref = self.sdpa(q, k, v, dense, layout=layout)
            out, lse = fragmask.attention(q, k, v, m, layout=layout, return_lse=True)
            self.assertLess(rel_err(out, ref), 1e-2, layout)
            self.assertTrue(torch.isfinite(lse).all(), layout)
            # Through the registered op (torch.compile's path) as well.
            mc = m.to("cuda")
            out_op = torch.compile(lambda a, b, c: fragmask.attention(a, b, c, mc, layout=layout),
                                   fullgraph=True)(q, k, v)
            self.assertLess(rel_err(out_op, ref), 1e-2, f"{layout}, compiled")


def math_attention(q, k, v, mask=None, causal=False, scale=None):
    """fp32 math attention, [B, H, S, D] (k, v repeated over GQA groups); a row with no
    visible key has O = 0 and zero gradients (the kernels' convention)."""
    q, k, v = q.float(), k.float(), v.float()
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:   # top-left aligned, as fragmask.attention(causal=True) and SDPA's is_causal
        sq, sk = s.shape[-2:]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    mx = s.amax(-1, keepdim=True).detach()
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = torch.exp(s - mx)
    den = e.sum(-1, keepdim=True)
    return (e / torch.where(den > 0, den, torch.ones_like(den))) @ v


@needs_gpu
class AutogradTests(unittest.TestCase):
    """loss.backward() through fragmask.attention against torch autograd through fp32
    math attention with the same bool mask (issue 13's small-shape check: relative error
    below 2e-2 for bf16)."""

    @classmethod
    def setUpClass(cls):
        fragmask.warmup(head_dims=(64, 128))

    def grads(self, fn, q, k, v, do):
        q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
        out = fn(q, k, v)
        out.backward(do)
        return out.detach(), q.grad, k.grad, v.grad

    def check(self, what, q, k, v, fm, ref, layout="bhsd", tol=2e-2):
        g = torch.Generator(device="cuda").manual_seed(3)
        do = torch.randn(q.shape, device="cuda", dtype=q.dtype, generator=g)
        got = self.grads(fm, q, k, v, do)
        want = self.grads(ref, q.float(), k.float(), v.float(), do.float())
        for name, a, b in zip(("o", "dq", "dk", "dv"), got, want):
            self.assertIsNotNone(a, f"{what}: {name}")
            self.assertEqual(a.shape, b.shape, f"{what}: {name}")
            self.assertTrue(torch.isfinite(a).all(), f"{what}: {name} not finite")
            self.assertLess(rel_err(a, b), tol, f"{what}: {name}")

    def test_gradients_match_fp32_math_attention_for_every_mask_source(self):
        B, H, Hk, Sq, Sk, D = 2, 4, 2, 300, 260, 128
        g = torch.Generator(device="cuda").manual_seed(21)
        dense = torch.rand(B, H, Sq, Sk, device="cuda", generator=g) < 0.5
        dense[:, :, 7] = False            # fully masked rows: zero gradients
        idx = torch.stack([torch.randperm(Sk, device="cuda")[:32] for _ in range(Sq)])
        topk = torch.zeros(Sq, Sk, dtype=torch.bool, device="cuda")
        topk.scatter_(1, idx, True)
        causal = torch.ones(Sq, Sk, dtype=torch.bool, device="cuda").tril()
        masks = {
            "dense, CPU-packed, no transposed lists": (Mask.from_dense(dense.cpu()), dense),
            "dense, GPU-packed with transposed lists": (
                Mask.from_dense(dense, transposed=True), dense),
            "dense, GPU-packed, lists added at backward": (Mask.from_dense(dense), dense),
            "topk": (Mask.from_topk(idx.cpu(), Sk).with_transposed(), topk),
            "predicate": (Mask.from_predicate("causal@top-left", Sq, Sk), causal),
            "64x64 tile": (Mask.from_dense(dense, block=(64, 64), transposed=True), dense),
        }
        for layout in ("bhsd", "bshd"):
            q, k, v = (torch.randn(s, device="cuda", dtype=torch.bfloat16, generator=g)
                       for s in ((B, H, Sq, D), (B, Hk, Sk, D), (B, Hk, Sk, D)))
            tr = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
            un = (lambda t: t.transpose(1, 2)) if layout == "bshd" else (lambda t: t)
            cases = {name: ({"mask": m}, {"mask": bool_mask})
                     for name, (m, bool_mask) in masks.items()}
            cases["causal"] = ({"causal": True}, {"causal": True})
            cases["no mask"] = ({}, {})
            for name, (ours, ref) in cases.items():
                with self.subTest(case=name, layout=layout):
                    self.check(f"{name} {layout}", tr(q), tr(k), tr(v),
                               lambda q, k, v: fragmask.attention(q, k, v, layout=layout,
                                                                  **ours),
                               lambda q, k, v: tr(math_attention(un(q), un(k), un(v), **ref)))

    def test_head_dim_forward_tiles_are_refused_for_training_before_the_forward(self):
        # head_dim=64's and 256's forward tiles (192x128, 128x80) have no backward: a call
        # needing one is refused before its forward, in either layout; without grad it
        # runs; the same masks made with transposed=True (128x128) train.
        B, H, Sq, Sk = 1, 2, 300, 260
        g = torch.Generator(device="cuda").manual_seed(31)
        dense = torch.rand(Sq, Sk, device="cuda", generator=g) < 0.5
        dense[:, 0] = True
        for D, tile in ((64, (192, 128)), (256, (128, 80))):
            with self.subTest(head_dim=D):
                q, k, v = (torch.randn(B, H, s, D, device="cuda", dtype=torch.bfloat16,
                                       generator=g) for s in (Sq, Sk, Sk))
                m = Mask.from_dense(dense, head_dim=D)
                self.assertEqual(m.block, tile)
                for layout in ("bhsd", "bshd"):
                    tr = ((lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd"
                          else (lambda t: t))
                    qg = tr(q).requires_grad_()
                    with self.assertRaisesRegex(ValueError, f"{tile[0]}x{tile[1]} tile .*transposed=True"):
                        fragmask.attention(qg, tr(k), tr(v), m, layout=layout)
                    with torch.no_grad():
                        out = fragmask.attention(qg, tr(k), tr(v), m, layout=layout)
                    self.assertIsNone(out.grad_fn)
                trained = Mask.from_dense(dense, head_dim=D, transposed=True)
                self.assertEqual(trained.block, (128, 128))
                self.check(f"128x128 d{D}", q, k, v,
                           lambda q, k, v: fragmask.attention(q, k, v, trained),
                           lambda q, k, v: math_attention(q, k, v, mask=dense))

    def test_64_token_blocks_pair_their_key_blocks_and_match_fp32(self):
        # A 64x64 mask's backward pairs its key blocks by default (docs/backward.md, "Paired
        # key blocks"): two 64-key blocks per CTA walk the union of their query tiles, and a
        # warpgroup skips the steps its block does not see. MHA with a per-head mask, GQA over
        # a one-head mask, an odd count of key blocks, whole and partial 64-token blocks, and a
        # key block no query sees; bf16 at head dim 128 and fp16 at 64; packed on the host
        # (paired), on the GPU (unpaired) and on the GPU with its lists read back (paired).
        g = torch.Generator(device="cuda").manual_seed(13)
        B, Sq, Sk = 2, 330, 450
        for H, Hk, mask_heads, D, dtype in ((3, 3, 3, 128, torch.bfloat16),
                                            (4, 2, 1, 128, torch.bfloat16),
                                            (2, 2, 2, 64, torch.float16)):
            shape = (B, mask_heads, (Sq + 63) // 64, (Sk + 63) // 64)
            kept = torch.rand(shape, device="cuda", generator=g) < 0.3
            whole = torch.rand(shape, device="cuda", generator=g) < 0.5
            up = lambda t: t.repeat_interleave(64, 2).repeat_interleave(64, 3)[:, :, :Sq, :Sk]
            partial = torch.rand(B, mask_heads, Sq, Sk, device="cuda", generator=g) < 0.7
            dense = up(kept) & (up(whole) | partial)
            dense[:, :, :, 64:128] = False
            q = torch.randn(B, H, Sq, D, device="cuda", dtype=dtype, generator=g)
            k, v = (torch.randn(B, Hk, Sk, D, device="cuda", dtype=dtype, generator=g)
                    for _ in range(2))
            # Packed on the host, the pairs' table is built from its lists; packed on the
            # GPU, the lists are on the device only and the backward runs unpaired, until
            # to("cpu") reads them back: then it pairs, as the host-packed mask does.
            for packed_on in ("cpu", "cuda", "cuda, read back"):
                m = Mask.from_dense(dense.to("cpu" if packed_on == "cpu" else "cuda"),
                                    block=(64, 64), transposed=True)
                if packed_on == "cuda, read back":
                    m.to("cpu")
                with self.subTest(H=H, Hk=Hk, mask_heads=mask_heads, D=D, packed_on=packed_on):
                    self.check(f"64-token blocks H={H}/{Hk} D={D} packed on {packed_on}", q, k, v,
                               lambda q, k, v: fragmask.attention(q, k, v, m),
                               lambda q, k, v: math_attention(q, k, v, dense))
                    self.assertEqual(self.plans_of(m)[1], {packed_on != "cuda"})

    def plans_of(self, m):
        """(shared_kv, paired_keys): the sets of what the eager path's plans of mask `m`
        run, its forward plans (found by the registry id it plans with) and their
        backward plans."""
        from fragmask import _ops

        entries = [e for key, e in _ops._fwd_plans.items() if key[8] == m._meta[8]]
        return ({e[_ops._HANDLE].shared_kv for e in entries},
                {h.paired_keys for e in entries for h in e[_ops._BWD][6].values()})

    def test_64_token_masks_read_back_from_the_gpu_plan_as_host_packed_ones(self):
        # mask.to("cpu") reads a GPU pack's lists back once. Its plans then build the
        # forward's shared-K/V steps and the backward's paired key blocks from the host
        # copy, which is the device buffers' lists as they are: the host-packed mask's
        # plans and forward bits, and fp32's gradients. Query blocks 2i and 2i+1 keep the
        # same key blocks, so the shared-K/V pairs load half the blocks (taken at one
        # split). A graph captured before the read-back replays on the same device lists.
        g = torch.Generator(device="cuda").manual_seed(17)
        B, H, Sq, Sk, D = 2, 3, 330, 450, 128
        mb, nb = (Sq + 63) // 64, (Sk + 63) // 64
        kept = torch.rand(B, H, (mb + 1) // 2, nb, device="cuda", generator=g) < 0.4
        kept = kept.repeat_interleave(2, 2)[:, :, :mb]
        up = lambda t: t.repeat_interleave(64, 2).repeat_interleave(64, 3)[:, :, :Sq, :Sk]
        dense = up(kept) & (torch.rand(B, H, Sq, Sk, device="cuda", generator=g) < 0.7)
        q = torch.randn(B, H, Sq, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(B, H, Sk, D, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        attention = lambda q, k, v, m: fragmask.attention(q, k, v, m, splits=1)
        fp32 = lambda q, k, v: math_attention(q, k, v, dense)
        host = Mask.from_dense(dense.cpu(), block=(64, 64), transposed=True)
        ref = attention(q, k, v, host)
        self.assertEqual(self.plans_of(host)[0], {True})
        m = Mask.from_dense(dense, block=(64, 64), transposed=True)
        geometry = m._meta[8]
        unread = attention(q, k, v, m)   # the one-block tile: lists on the device only
        self.assertEqual(self.plans_of(m)[0], {False})
        self.assertLess(rel_err(unread, fp32(q, k, v)), 2e-2)
        static = [t.clone() for t in (q, k, v)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            attention(*static, m)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = attention(*static, m)
            # Nothing reads back under capture: a clear error, not a wait.
            with self.assertRaisesRegex(RuntimeError, "before capturing"):
                m.stats()
        self.assertIsNone(m._host)
        self.assertIs(m.to("cpu"), m)
        self.assertNotEqual(m._meta[8], geometry)
        self.assertEqual(m, host)
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(captured, unread))
        self.assertTrue(torch.equal(attention(q, k, v, m), ref))
        self.assertEqual(self.plans_of(m), ({True}, set()))
        self.check("read back", q, k, v, lambda q, k, v: attention(q, k, v, m), fp32)
        self.assertEqual(self.plans_of(m), ({True}, {True}))
        # Without transposed lists, read back first: a 64x64 mask with host lists gets
        # them from the CPU at its first backward, which pairs at once; a later to("cpu")
        # changes nothing.
        m = Mask.from_dense(dense, block=(64, 64)).to("cpu")
        self.check("lists added at backward", q, k, v, lambda q, k, v: attention(q, k, v, m),
                   fp32)
        self.assertEqual(self.plans_of(m)[1], {True})
        m.to("cpu")
        self.check("lists added at backward, read back", q, k, v,
                   lambda q, k, v: attention(q, k, v, m), fp32)
        self.assertEqual(self.plans_of(m)[1], {True})
        # Not read back, the GPU builds them and they stay there: unpaired. Packed on the
        # host without them (write-up 002's from_blocks lists), the CPU builds them: paired.
        m = Mask.from_dense(dense, block=(64, 64))
        self.check("GPU pack, lists added at backward", q, k, v,
                   lambda q, k, v: attention(q, k, v, m), fp32)
        self.assertEqual(self.plans_of(m)[1], {False})
        m = Mask.from_dense(dense.cpu(), block=(64, 64))
        self.check("host pack, lists added at backward", q, k, v,
                   lambda q, k, v: attention(q, k, v, m), fp32)
        self.assertEqual(self.plans_of(m)[1], {True})

    def test_a_transposed_copy_outlives_the_gpu_mask_it_was_made_from(self):
        # A GPU-packed mask and its with_transposed() copy view the same pack's forward
        # lists, so they share one forward plan entry and its backward handle, made with
        # the transposed lists of whichever ran backward first. That entry keeps those
        # lists alive: collecting the first mask leaves no dangling addresses (freed
        # blocks refilled with garbage below), and the copy's gradients stay fp32's.
        import gc
        import weakref

        from fragmask import _ops
        g = torch.Generator(device="cuda").manual_seed(23)
        B, H, Sq, Sk, D = 1, 2, 300, 280, 128
        dense = torch.rand(B, H, Sq, Sk, device="cuda", generator=g) < 0.4
        q = torch.randn(B, H, Sq, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(B, H, Sk, D, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        fp32 = lambda q, k, v: math_attention(q, k, v, dense)
        first = Mask.from_dense(dense)   # its backward builds transposed lists on the GPU
        self.check("first mask", q, k, v, lambda q, k, v: fragmask.attention(q, k, v, first),
                   fp32)
        lists = weakref.ref(_ops._device_transposed(torch, first, q.device)[0][0])
        copy = first.with_transposed()
        del first
        gc.collect()
        self.assertIsNotNone(lists(), "the forward entry's backward handle keeps its lists")
        junk = [torch.full((n,), -1, dtype=torch.int32, device="cuda")
                for n in (64, 256, 1024, 4096, 16384) for _ in range(40)]
        self.check("copy, first collected", q, k, v,
                   lambda q, k, v: fragmask.attention(q, k, v, copy), fp32)
        del junk

    def test_whole_block_masks_without_transposed_lists_get_them_at_backward(self):
        # A host mask of whole tiles only (no partial tile, so no words) and no transposed
        # lists: its first backward builds them (the CPU: its empty words have no device
        # address for the GPU packer, which refused them with a ValueError before). At the
        # 128x128 tile (the GPU path otherwise) and at 64x64 (the CPU: paired).
        g = torch.Generator().manual_seed(29)
        H, S, D = 2, 512, 128
        for block in (128, 64):
            nb = S // block
            index = torch.rand(H, nb, nb, generator=g).argsort(-1)[..., :nb // 2]
            num = torch.full((H, nb), nb // 2, dtype=torch.int64)
            m = Mask.from_blocks(index, num, block_size=block, seqlen_q=S, seqlen_k=S,
                                 block=(block, block))
            self.assertFalse(m.has_transposed)
            self.assertEqual(m.stats()["partial"], 0)
            dense = torch.from_numpy(m.to_dense()).cuda().reshape(1, H, S, S)
            gq = torch.Generator(device="cuda").manual_seed(block)
            q, k, v = (torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16,
                                   generator=gq) for _ in range(3))
            self.check(f"whole {block}-token blocks", q, k, v,
                       lambda q, k, v: fragmask.attention(q, k, v, m),
                       lambda q, k, v: math_attention(q, k, v, dense))

    def test_fp16_head_dim_64_and_mqa(self):
        B, H, Sq, Sk, D = 1, 4, 200, 333, 64
        g = torch.Generator(device="cuda").manual_seed(5)
        dense = torch.rand(Sq, Sk, device="cuda", generator=g) < 0.3
        m = Mask.from_dense(dense)
        for dtype in (torch.float16, torch.bfloat16):
            q = torch.randn(B, H, Sq, D, device="cuda", dtype=dtype, generator=g)
            k, v = (torch.randn(B, 1, Sk, D, device="cuda", dtype=dtype, generator=g)
                    for _ in range(2))
            self.check(f"{dtype} MQA", q, k, v,
                       lambda q, k, v: fragmask.attention(q, k, v, m),
                       lambda q, k, v: math_attention(q, k, v, dense))

    def test_causal_gqa_gradients_over_group_slices_match_fp32(self):
        # A causal call whose group is a power of two of at least 4 splits the group's
        # query heads over CTAs by default (docs/backward.md, "GQA"): dK and dV are summed
        # in the workspace's f32 accumulators. Groups 4, 8 and MQA, both layouts, fp16.
        g = torch.Generator(device="cuda").manual_seed(8)
        for H, Hk, S, D, dtype, layout in ((8, 2, 300, 128, torch.bfloat16, "bhsd"),
                                           (16, 2, 257, 128, torch.bfloat16, "bshd"),
                                           (8, 1, 200, 64, torch.float16, "bhsd")):
            q, k, v = (torch.randn(s, device="cuda", dtype=dtype, generator=g)
                       for s in ((2, H, S, D), (2, Hk, S, D), (2, Hk, S, D)))
            tr = (lambda t: t.transpose(1, 2).contiguous()) if layout == "bshd" else (lambda t: t)
            un = (lambda t: t.transpose(1, 2)) if layout == "bshd" else (lambda t: t)
            with self.subTest(H=H, Hk=Hk, layout=layout):
                self.check(f"causal {H}:{Hk} {layout}", tr(q), tr(k), tr(v),
                           lambda q, k, v: fragmask.attention(q, k, v, causal=True,
                                                              layout=layout),
                           lambda q, k, v: tr(math_attention(un(q), un(k), un(v),
                                                             causal=True)))

    def test_the_transposed_lists_are_added_once_and_cached(self):
        S, D = 256, 128
        dense = torch.rand(S, S, device="cuda") < 0.5
        m = Mask.from_dense(dense)
        self.assertFalse(m.has_transposed)
        q, k, v = (torch.randn(1, 2, S, D, device="cuda", dtype=torch.bfloat16,
                               requires_grad=True) for _ in range(3))
        fragmask.attention(q, k, v, m).sum().backward()
        cached = [key for key in m._device_cache if key.endswith(":transposed")]
        self.assertEqual(len(cached), 1)
        lists = m._device_cache[cached[0]][0]
        fragmask.attention(q, k, v, m).sum().backward()
        self.assertIs(m._device_cache[cached[0]][0], lists)
        # Without grad, no transposed lists are built.
        m2 = Mask.from_dense(dense)
        with torch.no_grad():
            fragmask.attention(q, k, v, m2)
        self.assertFalse(any(key.endswith(":transposed") for key in m2._device_cache))

    def test_opcheck_of_the_backward_op(self):
        from fragmask import _ops

        S, D = 130, 64
        q, k, v = (torch.randn(1, 2, S, D, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        m = Mask.from_predicate("window=64:0", S, S).with_transposed().to("cuda")
        attention_op, _ = _ops._register()
        lists = _ops._device_lists(torch, m, q.device)
        tlists, bwd_id = _ops._device_transposed(torch, m, q.device)
        meta = list(m._meta) + [bwd_id]
        args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), *lists, *tlists,
                meta, False, [-1, -1], 0.125, 0, False)
        torch.library.opcheck(attention_op, args)     # includes the autograd registration
        out, lse = attention_op(*args)
        do = torch.randn_like(out)
        torch.library.opcheck(_ops._backward_op,
                              (q.detach(), k.detach(), v.detach(), out.detach(), lse, do,
                               *lists, *tlists, meta, False, [-1, -1], 0.125, False))
        none6 = (None,) * 6
        for deterministic in (False, True):
            torch.library.opcheck(_ops._backward_op,
                                  (q.detach(), k.detach(), v.detach(), out.detach(), lse, do,
                                   *none6, *none6, [], True, [-1, -1], 0.125, deterministic))
        # The forward op carries its mode to the autograd formula (opcheck's autograd
        # registration test with it on).
        torch.library.opcheck(attention_op, args[:-1] + (True,))

    def test_cuda_graph_captures_forward_and_backward(self):
        S, D = 256, 128
        g = torch.Generator(device="cuda").manual_seed(9)
        m = Mask.from_dense(torch.rand(S, S, device="cuda", generator=g) < 0.4, transposed=True)
        q, k, v = (torch.randn(1, 2, S, D, device="cuda", dtype=torch.bfloat16,
                               generator=g).requires_grad_() for _ in range(3))
        do = torch.randn(1, 2, S, D, device="cuda", dtype=torch.bfloat16, generator=g)

        def step():
            return torch.autograd.grad(fragmask.attention(q, k, v, m), (q, k, v), do)

        eager = step()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):   # the backward's workspace is per stream: warm it up
            step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            captured = step()
        graph.replay()
        torch.cuda.synchronize()
        # dQ is reduced with atomics (its order may differ run to run): close, not equal.
        for a, b in zip(captured, eager):
            self.assertLess(rel_err(a, b), 1e-3)
        # A stream with no workspace yet: a clear error, not a capture of an allocation.
        other = torch.cuda.Stream()
        with self.assertRaisesRegex(RuntimeError, "before capturing"):
            with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=other):
                step()

    def test_torch_compile_fullgraph_of_forward_and_backward(self):
        S, D = 256, 128
        g = torch.Generator(device="cuda").manual_seed(8)
        dense = torch.rand(S, S, device="cuda", generator=g) < 0.4
        m = Mask.from_dense(dense, transposed=True).to("cuda")

        def loss(q, k, v):
            return (fragmask.attention(q * 1.0, k, v, m).float() ** 2).sum()

        compiled = torch.compile(loss, fullgraph=True)
        q, k, v = (torch.randn(1, 4, S, D, device="cuda", dtype=torch.bfloat16,
                               generator=g).requires_grad_() for _ in range(3))
        eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
        traced = torch.autograd.grad(compiled(q, k, v), (q, k, v))
        for a, b in zip(traced, eager):   # dQ's atomics: close, not necessarily equal
            self.assertLess(rel_err(a, b), 1e-3)
        # A mask without transposed lists is a clear error under compile, not a crash.
        plain = Mask.from_dense(dense).to("cuda")
        f = torch.compile(lambda q, k, v: fragmask.attention(q, k, v, plain).sum(),
                          fullgraph=True)
        with self.assertRaisesRegex(Exception, "transposed"):
            f(q, k, v).backward()


@needs_gpu
class GpuPackerTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        fragmask.warmup(head_dims=(128,), lightning=(), packer_tiles=((128, 128), (64, 64)))

    def test_from_dense_on_the_gpu_equals_the_cpu_packer(self):
        g = torch.Generator(device="cuda").manual_seed(5)
        rand = lambda *s: torch.rand(*s, device="cuda", generator=g)
        causal = torch.ones(700, 700, dtype=torch.bool, device="cuda").tril()
        values = (rand(3, 130, 70) * 4).to(torch.uint8) * 85  # 0, 85, 170, 255
        cases = {
            "random 2-D ragged": rand(300, 260) < 0.5,
            "uint8 values 0..255 3-D": values,
            "int8 -1 4-D": -(rand(2, 2, 129, 257) < 0.3).to(torch.int8),
            "causal (full, partial, empty tiles)": causal,
            "all ones": torch.ones(256, 384, dtype=torch.bool, device="cuda"),
            "all zeros": torch.zeros(200, 100, dtype=torch.bool, device="cuda"),
            "transposed view": (rand(260, 300) < 0.5).T,
            "large": rand(4096, 4096) < 0.5,
        }
        for name, dense in cases.items():
            for tile in ((128, 128), (64, 64)):
                with self.subTest(mask=name, block=tile):
                    m = Mask.from_dense(dense, block=tile)
                    self.assertEqual(m.device, dense.get_device())
                    self.assertIsNone(m._host, "packed without reading anything back")
                    cpu = Mask.from_dense(dense.cpu(), block=tile)
                    self.assertEqual(m.shape, cpu.shape)
                    self.assertEqual(m, cpu)
                    self.assertEqual(m.stats(), cpu.stats())
                    np.testing.assert_array_equal(m.words, cpu.words)

    def test_a_mask_left_on_the_gpu_plans_the_read_back_masks_splits_and_output(self):
        # A GPU pack's host side is a placeholder with no tile: its plan must still split
        # a decode-shaped call's keys as the read-back mask's does (every block is partial
        # here), and give the same output byte for byte.
        g = torch.Generator(device="cuda").manual_seed(7)
        q = torch.randn(1, 8, 256, 128, device="cuda", dtype=torch.bfloat16, generator=g)
        k, v = (torch.randn(1, 8, 32768, 128, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        dense = torch.rand(256, 32768, device="cuda", generator=g) < 0.5
        on_gpu = Mask.from_dense(dense)
        read_back = Mask.from_dense(dense).to("cpu")
        plans = [fragmask.AttentionPlan(q, k, v, m) for m in (on_gpu, read_back)]
        self.assertIsNone(on_gpu._host, "the plan read nothing back")
        self.assertGreater(plans[1].splits, 1)
        self.assertEqual(plans[0].splits, plans[1].splits)
        outs = [p.run(q, k, v) for p in plans]
        self.assertTrue(torch.equal(outs[0], outs[1]))
        self.assertTrue(torch.equal(outs[0], fragmask.attention(q, k, v, on_gpu)))

    def test_a_mask_left_on_the_gpu_computes_dense_lists_when_every_tile_is_partial(self):
        # A GPU pack left on the device: at head dims 64 and 256 its forward kernel, and its
        # deterministic backward at every head dim, read the packer's partial-tile count when
        # they run and compute the lists' entries where every tile is partial (docs/masks.md,
        # "Dense tile lists"); head dim 128's forward reads them. Outputs and deterministic
        # gradients equal the read-back mask's (host-checked dense lists) byte for byte, and
        # lists that are not dense are read as before.
        g = torch.Generator(device="cuda").manual_seed(19)
        S, H = 1000, 2
        random50 = torch.rand(S, S, device="cuda", generator=g) < 0.5
        sparse = torch.zeros(S, S, dtype=torch.bool, device="cuda")
        sparse[:512, 256:640] = random50[:512, 256:640]       # a few partial tiles, others empty
        for name, dense, all_partial in (("random 50%", random50, True),
                                         ("block-sparse", sparse, False)):
            for d in (64, 128):
                with self.subTest(mask=name, head_dim=d):
                    q, k, v, do = (torch.randn(1, H, S, d, device="cuda", dtype=torch.bfloat16,
                                               generator=g) for _ in range(4))
                    on_gpu = Mask.from_dense(dense, transposed=True)
                    read_back = Mask.from_dense(dense, transposed=True).to("cpu")
                    plans = [fragmask.AttentionPlan(q, k, v, m) for m in (on_gpu, read_back)]
                    self.assertIsNone(on_gpu._host, "the plan read nothing back")
                    self.assertEqual("dense-at-run-time" in plans[0].kernel.split(), d != 128)
                    self.assertEqual("dense" in plans[0].kernel.split(), False)
                    self.assertEqual("dense" in plans[1].kernel.split(), all_partial)
                    outs = [p.run(q, k, v) for p in plans]
                    if (plans[0].splits, plans[0].tail) == (plans[1].splits, plans[1].tail):
                        self.assertTrue(torch.equal(outs[0], outs[1]))
                    else:   # the placeholder weighs every key block (split_plan_steps)
                        self.assertFalse(all_partial, "a dense mask plans the same splits")
                        self.assertLess(rel_err(outs[0].float(), outs[1].float()), 1e-2)
                    ref = math_attention(q.float(), k.float(), v.float(), dense)
                    self.assertLess(rel_err(outs[0].float(), ref), 2e-2)
                    for det in (False, True):
                        grads = []
                        for m in (on_gpu, read_back):
                            qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
                            out = fragmask.attention(qq, kk, vv, m, deterministic=det)
                            grads.append(torch.autograd.grad(out, (qq, kk, vv), do))
                        self.assertIsNone(on_gpu._host, "the backward read nothing back")
                        for a, b in zip(*grads):
                            if det and all_partial:   # the same forward plans, outputs
                                self.assertTrue(torch.equal(a, b))
                            else:
                                self.assertLess(rel_err(a.float(), b.float()), 1e-2)

    def test_masks_run_their_tiles_largest_first_from_gpu_and_host_lists(self):
        # An upper-triangular random mask: key tile n is visited by the query tiles up to
        # n, and row block m visits the key tiles from m on, so the largest-first orders
        # are the reverse of the backward's index order and of the forward grid's order
        # (from the last row). The GPU packer and transposer write them beside the lists
        # they build, and a host-packed mask's plans upload them; the forward and, outside
        # the deterministic mode (whose CTAs wait for the key tiles before them), the
        # backward run them, and outputs and gradients match fp32's.
        from fragmask import _ops

        g = torch.Generator(device="cuda").manual_seed(23)
        S, H, D = 1000, 2, 128
        dense = torch.triu(torch.rand(S, S, device="cuda", generator=g) < 0.5)
        dense[:, -1] = True
        q, k, v, do = (torch.randn(1, H, S, D, device="cuda", dtype=torch.bfloat16,
                                   generator=g) for _ in range(4))
        ref = [t.float().requires_grad_() for t in (q, k, v)]
        ref_out = math_attention(*ref, dense)
        ref_out.backward(do.float())
        ref_out = ref_out.detach()
        for packed_on in ("cuda", "cpu"):
            m = Mask.from_dense(dense.to(packed_on), transposed=True)
            plan = fragmask.AttentionPlan(q, k, v, m)
            self.assertTrue(plan.largest_first, packed_on)
            self.assertLess(rel_err(plan.run(q, k, v).float(), ref_out), 2e-2, packed_on)
            for det in (False, True):
                with self.subTest(packed_on=packed_on, deterministic=det):
                    qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
                    out = fragmask.attention(qq, kk, vv, m, deterministic=det)
                    got = torch.autograd.grad(out, (qq, kk, vv), do)
                    for name, a, b in zip(("dq", "dk", "dv"), got, ref):
                        self.assertLess(rel_err(a.float(), b.grad), 2e-2, name)
            modes = {(key[2], h.largest_first) for k, e in _ops._fwd_plans.items()
                     if k[8] == m._meta[8] for key, h in e[_ops._BWD][6].items()}
            self.assertEqual(modes, {(False, True), (True, False)}, packed_on)
            if packed_on == "cuda":
                self.assertIsNone(m._host, "the backward read nothing back")

    def test_from_dense_runs_on_the_current_stream(self):
        dense = torch.rand(2048, 2048, device="cuda") < 0.5
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            # Written and packed on the side stream only: ordering is the stream's.
            late = dense.clone()
            late[:1024] = ~late[:1024]
            m = Mask.from_dense(late)
        torch.cuda.current_stream().wait_stream(s)
        self.assertEqual(m, Mask.from_dense(late.cpu()))

    def test_gpu_packed_mask_in_attention_compile_and_graphs(self):
        S, D = 384, 128
        g = torch.Generator(device="cuda").manual_seed(11)
        q, k, v = (torch.randn(1, 4, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(3))
        dense = torch.rand(S, S, device="cuda", generator=g) < 0.3
        dense |= torch.ones(S, S, dtype=torch.bool, device="cuda").tril()
        m = Mask.from_dense(dense)
        ref = fragmask.attention(q, k, v, Mask.from_dense(dense.cpu()))
        self.assertTrue(torch.equal(fragmask.attention(q, k, v, m), ref))
        f = torch.compile(lambda q, k, v: fragmask.attention(q, k, v, m), fullgraph=True)
        self.assertTrue(torch.equal(f(q, k, v), ref))
        static = [t.clone() for t in (q, k, v)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fragmask.attention(*static, m)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fragmask.attention(*static, m)
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, ref))

    def assert_same_transposed(self, m, cpu, what):
        self.assertTrue(cpu.has_transposed, what)
        self.assertEqual(m, cpu, what)
        for name in ("q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices",
                     "q_tile_offsets", "q_words"):
            np.testing.assert_array_equal(getattr(m, name), getattr(cpu, name),
                                          err_msg=f"{what}: {name}")

    def test_transposed_lists_on_the_gpu_equal_the_cpus(self):
        g = torch.Generator(device="cuda").manual_seed(13)
        rand = lambda *s: torch.rand(*s, device="cuda", generator=g)
        cases = {
            "random 2-D ragged": rand(300, 260) < 0.5,
            "4-D, odd lengths": rand(2, 3, 129, 257) < 0.3,
            "causal": torch.ones(700, 700, dtype=torch.bool, device="cuda").tril(),
            "all zeros": torch.zeros(200, 100, dtype=torch.bool, device="cuda"),
            "large": rand(2048, 2048) < 0.5,
        }
        for name, dense in cases.items():
            for tile in ((128, 128), (64, 64)):
                with self.subTest(mask=name, block=tile):
                    cpu = Mask.from_dense(dense.cpu(), block=tile).with_transposed()
                    # Packed and transposed on the GPU, nothing read back until asked.
                    m = Mask.from_dense(dense, block=tile, transposed=True)
                    self.assertTrue(m.has_transposed)
                    self.assertIsNone(m._host, "transposed without reading anything back")
                    self.assert_same_transposed(m, cpu, f"{name} from_dense")
                    # with_transposed on a GPU pack, after its host copy was read.
                    m = Mask.from_dense(dense, block=tile)
                    self.assertFalse(m.has_transposed)
                    m.stats()
                    self.assert_same_transposed(m.with_transposed(), cpu,
                                                f"{name} with_transposed")
        # A host mask of another source, transposed on the GPU it is copied to.
        idx = torch.stack([torch.randperm(333)[:40] for _ in range(300)])
        host = Mask.from_topk(idx, 333)
        self.assert_same_transposed(host.with_transposed(device="cuda"),
                                    host.with_transposed(), "topk on the GPU")
        self.assertFalse(host.has_transposed)

    def test_errors(self):
        with self.assertRaisesRegex(TypeError, "mask: dtype float32"):
            Mask.from_dense(torch.zeros(64, 64, device="cuda"))
        with self.assertRaisesRegex(ValueError, "dense mask"):
            Mask.from_dense(torch.zeros(64, dtype=torch.bool, device="cuda"))
        with self.assertRaisesRegex(ValueError, "seqlen_q"):
            Mask.from_dense(torch.zeros(0, 64, dtype=torch.bool, device="cuda"))
        with self.assertRaisesRegex(ValueError, "block="):
            Mask.from_dense(torch.zeros(64, 64, dtype=torch.bool, device="cuda"),
                            block=(100, 64))
        # Another encoding packs a host copy on the CPU, as before.
        d = torch.rand(100, 100, device="cuda") < 0.5
        m = Mask.from_dense(d, encoding="quad-lane")
        self.assertIsNone(m.device)
        self.assertEqual(m, Mask.from_dense(d.cpu(), encoding="quad-lane"))


@needs_gpu
class LightningTests(unittest.TestCase):
    def test_matches_the_reference_over_steps_in_place(self):
        B, H, D = 2, 8, 96
        g = torch.Generator(device="cuda").manual_seed(3)
        kv = torch.randn(B, H, D, D, device="cuda", generator=g)
        ref = kv.double().clone()
        slope = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], device="cuda")
        for step in range(50):
            q, k, v = (torch.randn(B, H, 2, D, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(3))
            o = fragmask.lightning_decode(q, k, v, kv, slope)
            ratio = torch.exp(-slope.double()).view(H, 1, 1)
            outs = []
            for i in range(2):
                ref = ratio * ref + k[:, :, i].double().unsqueeze(-1) * v[:, :, i].double().unsqueeze(-2)
                outs.append((q[:, :, i].double().unsqueeze(-2) @ ref).squeeze(-2))
            self.assertLess(rel_err(o, torch.stack(outs, 2)), 1e-2, f"step {step}")
        self.assertLess(rel_err(kv, ref), 1e-4)

    def test_out_receives_the_same_output_and_state(self):
        g = torch.Generator(device="cuda").manual_seed(5)
        q, k, v = (torch.randn(2, 8, 3, 96, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(3))
        kv = torch.randn(2, 8, 96, 96, device="cuda", generator=g)
        slope = torch.rand(8, device="cuda", generator=g) * 0.1
        kv_out = kv.clone()
        ref = fragmask.lightning_decode(q, k, v, kv, slope)
        out = torch.full_like(v, float("nan"))
        got = fragmask.lightning_decode(q, k, v, kv_out, slope, out=out)
        self.assertIs(got, out)
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
        torch.testing.assert_close(kv_out, kv, rtol=0, atol=0)
        with self.assertRaisesRegex(ValueError, "overlaps"):
            fragmask.lightning_decode(q, k, v, kv_out, slope, out=v)
        with self.assertRaises(ValueError):
            fragmask.lightning_decode(q, k, v, kv_out, slope, out=out[..., :95])

    def test_out_that_is_not_v_like_or_meets_an_input_is_refused_by_name(self):
        """The fast path checks out's dtype, grad, device, contiguity and shape and the
        extension its overlap with every input (kv and slope included): each bad out
        raises the checked path's typed error, and nothing is written."""
        g = torch.Generator(device="cuda").manual_seed(6)
        q, k, v = (torch.randn(1, 4, 1, 96, device="cuda", dtype=torch.bfloat16, generator=g)
                   for _ in range(3))
        kv = torch.randn(1, 4, 96, 96, device="cuda", generator=g)
        slope = torch.rand(4, device="cuda", generator=g) * 0.1
        kv0 = kv.clone()
        ok = torch.empty_like(v)
        bad = {
            "float16": (TypeError, ValueError), "grad": ValueError, "cpu": ValueError,
            "strided": ValueError, "shape": ValueError,
        }
        outs = {
            "float16": torch.empty_like(v, dtype=torch.float16),
            "grad": torch.empty_like(v).requires_grad_(),
            "cpu": torch.empty(v.shape, dtype=v.dtype),
            "strided": torch.empty(1, 4, 96, 2, device="cuda",
                                   dtype=torch.bfloat16)[..., :1].transpose(2, 3),
            "shape": torch.empty(1, 4, 1, 95, device="cuda", dtype=torch.bfloat16),
        }
        for name, out in outs.items():
            with self.assertRaises(bad[name], msg=name):
                fragmask.lightning_decode(q, k, v, kv, slope, out=out)
        # out inside kv (the state, read and written in place) or reaching into slope.
        n = v.numel()
        in_kv = kv.view(-1)[:n].view(torch.bfloat16)[:n].view(v.shape)
        buf = torch.zeros(n + 8, device="cuda", dtype=torch.bfloat16)
        slope_in_buf = buf[n:].view(torch.float32)          # 4 floats after n bf16
        slope_in_buf.copy_(slope)
        into_slope = buf[4:4 + n].view(v.shape)
        for out, s, name in ((in_kv, slope, "kv"), (into_slope, slope_in_buf, "slope")):
            with self.assertRaisesRegex(ValueError, "overlaps", msg=name):
                fragmask.lightning_decode(q, k, v, kv, s, out=out)
        torch.testing.assert_close(kv, kv0, rtol=0, atol=0)   # no refused call ran
        self.assertIs(fragmask.lightning_decode(q, k, v, kv, slope, out=ok), ok)

    def test_errors(self):
        q = torch.randn(1, 2, 1, 96, device="cuda", dtype=torch.bfloat16)
        kv = torch.randn(1, 2, 96, 96, device="cuda")
        with self.assertRaises(ValueError):
            fragmask.lightning_decode(q, q, q, kv, torch.rand(3, device="cuda"))
        with self.assertRaises(TypeError):
            fragmask.lightning_decode(q, q, q, kv.half(), torch.rand(2, device="cuda"))
        with self.assertRaises(ValueError):
            fragmask.lightning_decode(q, q, q, kv[..., :95], torch.rand(2, device="cuda"))


def decode_reference(q, k, v, lens, sq_list, causal, q_rows):
    """fp32 SDPA per request and token over its keys, bottom-right causal."""
    H, Hk = q.shape[-2], k.shape[-2]
    out = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    for b, (n, sq) in enumerate(zip(lens, sq_list)):
        kb = k[b, :n].float().repeat_interleave(H // Hk, dim=1).transpose(0, 1)  # [H, n, D]
        vb = v[b, :n].float().repeat_interleave(H // Hk, dim=1).transpose(0, 1)
        for t in range(sq):
            row = q_rows(b, t)
            hi = n - sq + t + 1 if causal else n
            if hi <= 0:
                continue
            qt = q[row].float()[:, None]  # [H, 1, D]
            o = torch.nn.functional.scaled_dot_product_attention(qt, kb[:, :hi], vb[:, :hi])
            out[row] = o[:, 0]
    return out


@needs_gpu
class DecodeTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Registers the ops outside any trace (torch.compile cannot trace a
        # registration; the H100 run of 2026-11-23 ran this class alone without it and
        # the compile test errored there).
        fragmask.warmup(head_dims=(), lightning=())

    def cache(self, B, Sk, Hk, D, seed, dtype=None):
        dtype = dtype or torch.bfloat16
        g = torch.Generator(device="cuda").manual_seed(seed)
        return [torch.randn(B, Sk, Hk, D, device="cuda", dtype=dtype, generator=g)
                for _ in range(2)]

    def test_matches_sdpa_contiguous_paged_gqa_causal(self):
        B, Sq, H, Hk, Sk, D = 3, 4, 16, 4, 700, 128
        k, v = self.cache(B, Sk, Hk, D, 1)
        q = torch.randn(B, Sq, H, D, device="cuda", dtype=torch.bfloat16)
        lens = [700, 5, 333]
        sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
        for causal in (False, True):
            o = fragmask.decode(q, k, v, seqlens_k=sl, causal=causal)
            ref = decode_reference(q, k, v, lens, [Sq] * B, causal, lambda b, t: (b, t))
            self.assertLess(rel_err(o, ref), 1.6e-2, f"contiguous causal={causal}")
        # The same cache as shuffled pages of 16 keys.
        ps, mp = 16, (Sk + 15) // 16
        pad = mp * ps - Sk
        kp, vp = (torch.nn.functional.pad(t, (0, 0, 0, 0, 0, pad)).reshape(B * mp, ps, Hk, D)
                  for t in (k, v))
        perm = torch.randperm(B * mp, device="cuda")
        pages_k, pages_v = torch.empty_like(kp), torch.empty_like(vp)
        pages_k[perm], pages_v[perm] = kp, vp
        table = perm.reshape(B, mp).to(torch.int32)
        o, lse = fragmask.decode(q, pages_k, pages_v, block_table=table, seqlens_k=sl,
                                 causal=True, return_lse=True)
        ref = decode_reference(q, k, v, lens, [Sq] * B, True, lambda b, t: (b, t))
        self.assertLess(rel_err(o, ref), 1.6e-2)
        self.assertEqual(tuple(lse.shape), (B, H, Sq))
        self.assertTrue(torch.isfinite(lse).all())

    def test_variable_query_lengths_and_graph_replay(self):
        B, H, Hk, Sk, D, maxq = 3, 8, 2, 500, 64, 6
        k, v = self.cache(B, Sk, Hk, D, 2, torch.float16)
        total = B * maxq
        q = torch.randn(total, H, D, device="cuda", dtype=torch.float16)
        sl = torch.tensor([500, 77, 6], dtype=torch.int32, device="cuda")
        cu = torch.zeros(B + 1, dtype=torch.int32, device="cuda")

        def run():
            return fragmask.decode(q, k, v, seqlens_k=sl, cu_seqlens_q=cu, max_seqlen_q=maxq,
                                   causal=True, return_lse=True)

        def check(out, lens_q):
            starts = np.concatenate([[0], np.cumsum(lens_q)])
            ref = decode_reference(q, k, v, sl.tolist(), lens_q, True,
                                   lambda b, t: int(starts[b]) + t)
            rows = int(starts[-1])
            self.assertLess(rel_err(out[:rows], ref[:rows]), 4e-3, f"{lens_q}")

        cu.copy_(torch.tensor([0, 6, 7, 10], dtype=torch.int32))
        o, lse = run()
        check(o, [6, 1, 3])
        self.assertEqual(tuple(lse.shape), (H, total))
        # One graph captured at these lengths, replayed at others (the grid is planned
        # from max_seqlen_q, the lengths are read on the device).
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            run()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out, _ = run()
        for lens_q, lens_k in (([6, 6, 6], [500, 500, 500]), ([1, 0, 2], [3, 0, 500])):
            cu.copy_(torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32))
            sl.copy_(torch.tensor(lens_k, dtype=torch.int32))
            graph.replay()
            torch.cuda.synchronize()
            check(out, lens_q)

    def test_compile_fullgraph_and_opcheck(self):
        k, v = self.cache(2, 300, 2, 64, 3)
        q = torch.randn(2, 1, 8, 64, device="cuda", dtype=torch.bfloat16)
        f = lambda q, k, v: fragmask.decode(q, k, v)  # noqa: E731
        compiled = torch.compile(f, fullgraph=True)
        self.assertEqual(rel_err(compiled(q, k, v), f(q, k, v)), 0.0)
        from fragmask import _ops
        torch.library.opcheck(_ops._register_decode(),
                              (q, k, v, None, None, None, 0, [-1, -1], 0.0, 0,
                               None, None, None, 0))
        # A masked call compiles too (the mask's arrays prepared by a first eager call).
        mask = fragmask.Mask.from_dense(torch.rand(1, 1, 1, 300) < 0.5, block=(64, 64))
        fm = lambda q, k, v: fragmask.decode(q, k, v, mask=mask)  # noqa: E731
        eager = fm(q, k, v)
        self.assertEqual(rel_err(torch.compile(fm, fullgraph=True)(q, k, v), eager), 0.0)

    def masked_reference(self, q, k, v, dense, causal=False):
        """fp32 SDPA with the boolean mask dense [1 or B, 1 or H, Sq, Sk] (and causal,
        bottom-right), GQA by repetition; rows with no visible key give 0."""
        B, Sq, H, D = q.shape
        Hk, Sk = k.shape[2], k.shape[1]
        kk = k.float().repeat_interleave(H // Hk, dim=2).transpose(1, 2)
        vv = v.float().repeat_interleave(H // Hk, dim=2).transpose(1, 2)
        m = dense.to("cuda").expand(B, H, Sq, Sk).clone()
        if causal:
            t = torch.arange(Sq, device="cuda")[:, None] + (Sk - Sq)
            m &= torch.arange(Sk, device="cuda")[None, :] <= t
        s = (q.float().transpose(1, 2) @ kk.transpose(-1, -2)) * D ** -0.5
        s = s.masked_fill(~m, float("-inf"))
        p = torch.softmax(s, -1).nan_to_num(0.0)
        return (p @ vv).transpose(1, 2)

    def test_masks_from_python_match_the_dense_reference(self):
        torch.manual_seed(7)
        cases = [
            # (B, Sq, H, Hk, Sk, D, mask heads, block, causal): write-up 002's shape in
            # small (64-row shared-K/V CTAs), per-head masks with GQA (heads not packed),
            # masked D = 256 (one shared-K/V warp), q = 1 with 8 packed heads.
            (1, 64, 4, 4, 1500, 128, 1, (64, 64), False),
            (2, 64, 4, 2, 900, 64, 4, (64, 64), True),
            (2, 3, 8, 2, 700, 256, 8, (64, 128), False),
            (3, 1, 32, 4, 1000, 128, 1, (128, 128), False),
        ]
        for B, Sq, H, Hk, Sk, D, mh, block, causal in cases:
            k, v = self.cache(B, Sk, Hk, D, Sk)
            q = torch.randn(B, Sq, H, D, device="cuda", dtype=torch.bfloat16)
            dense = torch.rand(1, mh, Sq, Sk) < 0.3
            dense[..., :16] = True  # every row sees a key
            mask = fragmask.Mask.from_dense(dense, block=block)
            o = fragmask.decode(q, k, v, mask=mask, causal=causal)
            ref = self.masked_reference(q, k, v, dense, causal)
            self.assertLess(rel_err(o, ref), 1.6e-2, f"{B, Sq, H, Hk, Sk, D, mh, block}")
        with self.assertRaisesRegex(ValueError, "rows"):
            fragmask.decode(q[:, :1].expand(B, 2, H, D).contiguous(), k, v, mask=mask)

    def test_topk_from_python_reads_only_the_listed_keys(self):
        B, H, Hk, Sk, D, K = 3, 16, 4, 4096, 128, 300
        k, v = self.cache(B, Sk, Hk, D, 11)
        q = torch.randn(B, 2, H, D, device="cuda", dtype=torch.bfloat16)
        idx = torch.rand(B, Sk, device="cuda").topk(K, -1).indices.sort(-1).values
        o = fragmask.decode(q, k, v, topk_indices=idx.to(torch.int32))
        g = idx[:, :, None, None].expand(B, K, Hk, D)
        ref = self.masked_reference(q, k.gather(1, g), v.gather(1, g),
                                    torch.ones(1, 1, 2, K, dtype=torch.bool))
        self.assertLess(rel_err(o, ref), 1.6e-2)
        with self.assertRaisesRegex(ValueError, "causal"):
            fragmask.decode(q, k, v, topk_indices=idx.to(torch.int32), causal=True)
        with self.assertRaises(TypeError):
            fragmask.decode(q, k, v, topk_indices=idx)  # int64

    def test_eager_calls_skip_the_op_dispatch_and_equal_the_op(self):
        from fragmask import _ops
        k, v = self.cache(2, 800, 2, 128, 12)
        q = torch.randn(2, 1, 16, 128, device="cuda", dtype=torch.bfloat16)
        mask = fragmask.Mask.from_dense(torch.rand(1, 1, 1, 800) < 0.5, block=(64, 64))
        for m in (None, mask):
            args = (q, k, v, None, None, None, 0, [-1, -1], 0.0, 0,
                    *(_ops._decode_mask_arrays(torch, m, q.device) if m else (None,) * 3),
                    m._meta[8] if m else 0)
            via_op, _ = _ops._register_decode()(*args)
            saved = _ops._register_decode
            _ops._register_decode = None  # the fast path must not reach the op
            try:
                fast = fragmask.decode(q, k, v, mask=m)
            finally:
                _ops._register_decode = saved
            self.assertTrue(torch.equal(fast, via_op))
        # Under a dispatch mode the call goes through the registered op, same result.
        from torch.utils._python_dispatch import TorchDispatchMode

        class Record(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.ops.append(str(func))
                return func(*args, **(kwargs or {}))

        with Record() as rec:
            traced = fragmask.decode(q, k, v, mask=mask)
        self.assertIn("fragmask.decode.default", rec.ops)
        self.assertTrue(torch.equal(traced, fast))

    def test_errors_before_launch(self):
        k, v = self.cache(2, 64, 2, 64, 4)
        k4, v4 = self.cache(2, 64, 4, 64, 5)
        q4 = torch.randn(2, 1, 6, 64, device="cuda", dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "multiple"):
            fragmask.decode(q4, k4, v4)  # H = 6, Hkv = 4
        with self.assertRaises(TypeError):
            fragmask.decode(q4.float(), k, v)
        with self.assertRaisesRegex(ValueError, "max_seqlen_q"):
            fragmask.decode(q4[0], k, v, cu_seqlens_q=torch.zeros(3, dtype=torch.int32,
                                                                   device="cuda"))
        with self.assertRaisesRegex(ValueError, "cpu"):
            fragmask.decode(q4.cpu(), k, v)


if __name__ == "__main__":
    unittest.main()


@needs_gpu
class FastPathAndPlanTests(unittest.TestCase):
    """The eager autograd.Function path against the registered ops, the plan objects
    against the one-shot calls, and both inside CUDA graphs."""

    @classmethod
    def setUpClass(cls):
        fragmask.warmup(head_dims=(64, 128), lightning=((96, 96, "bf16"),))

    def inputs(self, shapes, seed=0, dtype=None, requires_grad=False):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return [torch.randn(s, device="cuda", dtype=dtype or torch.bfloat16, generator=g)
                .requires_grad_(requires_grad) for s in shapes]

    def grads(self, q, k, v, do, fast, **kw):
        from fragmask import _ops

        q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
        _ops._FAST = fast
        try:
            out = fragmask.attention(q, k, v, **kw)
            out.backward(do)
        finally:
            _ops._FAST = True
        return out.detach(), q.grad, k.grad, v.grad

    def test_bshd_gradients_come_back_in_the_inputs_layout_and_equal_the_bhsd_ones(self):
        from fragmask import _ops

        S, D = 300, 128
        q, k, v = self.inputs([(2, S, 4, D), (2, S, 2, D), (2, S, 2, D)], seed=3,
                              requires_grad=True)
        do = self.inputs([q.shape], seed=4)[0]
        bq, bk, bv = (t.detach().transpose(1, 2).contiguous().requires_grad_()
                      for t in (q, k, v))
        for kw in (dict(causal=True), dict(window=(50, 7)), dict()):
            out = fragmask.attention(bq, bk, bv, **kw)
            ref = torch.autograd.grad(out, (bq, bk, bv), do.transpose(1, 2))
            for fast in (True, False):
                _ops._FAST = fast
                try:
                    out = fragmask.attention(q, k, v, layout="bshd", **kw)
                    # autograd.grad hands back the backward's own tensors (no .grad copy):
                    # contiguous bshd inputs get contiguous bshd gradients.
                    got = torch.autograd.grad(out, (q, k, v), do)
                finally:
                    _ops._FAST = True
                for name, a, b, t in zip(("dq", "dk", "dv"), got, ref, (q, k, v)):
                    what = f"{name} {kw} fast={fast}"
                    self.assertEqual((a.shape, a.stride()), (t.shape, t.stride()), what)
                    self.assertLess(rel_err(a, b.transpose(1, 2)), 1e-3, what)

    def test_bshd_output_is_contiguous_in_the_callers_layout_on_every_path(self):
        from fragmask import _ops

        S, D = 300, 128
        q, k, v = self.inputs([(2, S, 4, D), (2, S, 2, D), (2, S, 2, D)], seed=6)
        bq, bk, bv = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        m = Mask.from_dense(torch.rand(S, S, device="cuda") < 0.4, transposed=True).to("cuda")
        for kw in (dict(causal=True), dict(mask=m), dict(window=(50, 7)),
                   dict(causal=True, splits=3)):
            ref = fragmask.attention(bq, bk, bv, **kw).transpose(1, 2)
            runs = {}
            for fast in (True, False):
                _ops._FAST = fast
                try:
                    runs[f"fast={fast}"] = fragmask.attention(q, k, v, layout="bshd", **kw)
                    with torch.enable_grad():
                        g = [t.detach().requires_grad_() for t in (q, k, v)]
                        runs[f"autograd fast={fast}"] = fragmask.attention(
                            *g, layout="bshd", **kw).detach()
                finally:
                    _ops._FAST = True
            runs["plan"] = fragmask.AttentionPlan(q, k, v, layout="bshd", **kw).run(q, k, v)
            if "window" not in kw and "splits" not in kw:   # two compiles: the op's fake strides
                compiled = torch.compile(lambda q, k, v: fragmask.attention(
                    q, k, v, layout="bshd", **kw) * 1.0, fullgraph=True)
                runs["compiled"] = compiled(q, k, v)
            for name, out in runs.items():
                what = f"{name} {kw}"
                self.assertEqual(out.shape, q.shape, what)
                if name != "compiled":   # the product is inductor's tensor, not the op's
                    self.assertTrue(out.is_contiguous(), what)
                self.assertLess(rel_err(out, ref), 1e-3, what)

    def test_an_autograd_forward_frees_its_output_with_its_graph(self):
        # Saving a view of the output in the autograd Function made a reference cycle
        # (the graph -> the saved view -> its base, the output -> the graph) that no
        # collector frees: every forward whose graph was dropped kept its output.
        import gc
        import weakref

        S, D = 256, 128
        for layout in ("bhsd", "bshd"):
            shapes = [(1, 4, S, D)] * 3 if layout == "bhsd" else [(1, S, 4, D)] * 3
            q, k, v = self.inputs(shapes, seed=7, requires_grad=True)
            gc.disable()
            try:
                refs = []
                for _ in range(3):
                    out = fragmask.attention(q, k, v, causal=True, layout=layout)
                    refs.append(weakref.ref(out))
                    del out
                alive = sum(r() is not None for r in refs)
            finally:
                gc.enable()
            self.assertEqual(alive, 0, layout)

    def test_autograd_function_gradients_equal_the_registered_ops(self):
        S, D = 300, 128
        g = torch.Generator(device="cuda").manual_seed(5)
        m = Mask.from_dense(torch.rand(S, S, device="cuda", generator=g) < 0.4,
                            transposed=True)
        plain = Mask.from_predicate("causal", S, S)    # transposed lists added on the GPU
        for layout in ("bhsd", "bshd"):
            shapes = [(2, 4, S, D), (2, 2, S, D), (2, 2, S, D)]
            if layout == "bshd":
                shapes = [(b, s_, h, d) for b, h, s_, d in shapes]
            q, k, v = self.inputs(shapes, seed=1)
            do = self.inputs([q.shape], seed=2)[0]
            for kw in (dict(mask=m), dict(mask=plain), dict(causal=True),
                       dict(window=(50, 7), scale=0.09)):
                kw = dict(kw, layout=layout)
                fast = self.grads(q, k, v, do, True, **kw)
                slow = self.grads(q, k, v, do, False, **kw)
                self.assertTrue(torch.equal(fast[0], slow[0]), f"o {kw}")
                for name, a, b in zip(("dq", "dk", "dv"), fast[1:], slow[1:]):
                    self.assertEqual(a.shape, b.shape, f"{name} {kw}")
                    # dQ is reduced with atomics: close, not necessarily equal.
                    self.assertLess(rel_err(a, b), 1e-3, f"{name} {kw}")

    def test_attention_plan_run_equals_attention_and_replays_in_a_cuda_graph(self):
        S, D = 256, 128
        m = Mask.from_predicate("window=64:0", S, S)
        for kw, shapes in (
                (dict(mask=m), [(1, 4, S, D), (1, 4, S, D), (1, 4, S, D)]),
                (dict(causal=True, layout="bshd"), [(2, S, 4, D), (2, S, 2, D), (2, S, 2, D)]),
                (dict(), [(2, 8, 1, D), (2, 2, 8192, D), (2, 2, 8192, D)]),   # decode kernel
                (dict(splits=3), [(1, 2, 64, D), (1, 2, 4096, D), (1, 2, 4096, D)])):
            q, k, v = self.inputs(shapes)
            plan = fragmask.AttentionPlan(q, k, v, **kw)
            want = fragmask.attention(q, k, v, return_lse=True, **kw)
            got = plan.run(q, k, v, return_lse=True)
            for a, b in zip(got, want):
                self.assertEqual(a.shape, b.shape, f"{kw}")
                self.assertTrue(torch.equal(a, b), f"{kw}")
            if kw.get("splits"):
                self.assertEqual(plan.splits, 3)
            if shapes[0][2] == 1:
                self.assertGreater(plan.splits, 1, "a decode shape plans split-KV by itself")
            static = [t.clone() for t in (q, k, v)]
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                plan.run(*static)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = plan.run(*static)
            new = self.inputs(shapes, seed=4)
            for dst, src in zip(static, new):
                dst.copy_(src)
            graph.replay()
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(out, fragmask.attention(*new, **kw)), f"{kw}")

    def test_plans_refuse_tensors_that_are_not_theirs(self):
        q, k, v = self.inputs([(1, 2, 128, 64)] * 3)
        plan = fragmask.AttentionPlan(q, k, v, causal=True)
        with self.assertRaisesRegex(ValueError, "q is not the plan's"):
            plan.run(q[:, :, :64], k, v)
        with self.assertRaisesRegex(ValueError, "k is not the plan's"):
            plan.run(q, k.half(), v)
        with self.assertRaisesRegex(ValueError, "splits"):
            fragmask.AttentionPlan(q, k, v, splits=0)
        with self.assertRaisesRegex(ValueError, "splits"):
            fragmask.attention(q, k, v, splits=-1)
        with self.assertRaisesRegex(TypeError, "splits"):
            fragmask.attention(q, k, v, splits="4")
        qd0 = torch.randn(1, 1, 2, 64, device="cuda", dtype=torch.bfloat16)
        kd0 = torch.randn(1, 128, 2, 64, device="cuda", dtype=torch.bfloat16)
        for bad, error in ((-1, ValueError), (2**64, ValueError), ("4", TypeError),
                           (2.0, TypeError)):
            with self.assertRaisesRegex(error, "splits"):
                fragmask.decode(qd0, kd0, kd0, splits=bad)
        qd = torch.randn(2, 1, 8, 128, device="cuda", dtype=torch.bfloat16)
        kc = torch.randn(2, 512, 8, 128, device="cuda", dtype=torch.bfloat16)
        dplan = fragmask.DecodePlan(qd, kc, kc)
        with self.assertRaisesRegex(ValueError, "k_cache is not the plan's"):
            dplan.run(qd, kc[:1], kc)

    def test_decode_plan_run_equals_decode_and_replays_in_a_cuda_graph(self):
        B, Sk, H, Hkv, D = 3, 1000, 8, 2, 128
        q, k, v = self.inputs([(B, 2, H, D), (B, Sk, Hkv, D), (B, Sk, Hkv, D)])
        lens = torch.tensor([1000, 17, 640], dtype=torch.int32, device="cuda")
        plan = fragmask.DecodePlan(q, k, v, seqlens_k=lens, causal=True)
        want = fragmask.decode(q, k, v, seqlens_k=lens, causal=True, return_lse=True)
        got = plan.run(q, k, v, seqlens_k=lens, return_lse=True)
        for a, b in zip(got, want):
            self.assertTrue(torch.equal(a, b))
        static = [t.clone() for t in (q, k, v)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            plan.run(*static, seqlens_k=lens)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = plan.run(*static, seqlens_k=lens)
        new = self.inputs([(B, 2, H, D), (B, Sk, Hkv, D), (B, Sk, Hkv, D)], seed=6)
        for dst, src in zip(static, new):
            dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, fragmask.decode(*new, seqlens_k=lens, causal=True)))

    def test_plain_decode_equals_the_plan_and_the_registered_op_on_two_streams(self):
        """A decode call without tables (split workspace: the stream's kept block) gives
        DecodePlan.run's and the registered op's results bit for bit, eagerly on two
        streams (one block each), with a larger call growing the block, and replayed
        from a CUDA graph (a block of the graph's pool)."""
        from fragmask import _ops

        B, Sk, H, D = 1, 4096, 8, 128
        q, k, v = self.inputs([(B, 1, H, D), (B, Sk, H, D), (B, Sk, H, D)], seed=11)
        plan = fragmask.DecodePlan(q, k, v)
        self.assertGreater(plan.splits, 1)   # the workspace is used
        want = plan.run(q, k, v, return_lse=True)
        _ops._FAST = False
        try:
            op = fragmask.decode(q, k, v, return_lse=True)
        finally:
            _ops._FAST = True
        for a, b in zip(op, want):
            self.assertTrue(torch.equal(a, b))
        streams = [torch.cuda.Stream() for _ in range(2)]
        outs = []
        for s in streams:
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                outs.append(fragmask.decode(q, k, v, return_lse=True))
        torch.cuda.synchronize()
        for got in outs:
            for a, b in zip(got, want):
                self.assertTrue(torch.equal(a, b))
        # A larger call on the same stream (a larger workspace), then the first again.
        q2, k2, v2 = self.inputs([(B, 64, H, D), (B, Sk, H, D), (B, Sk, H, D)], seed=12)
        plan2 = fragmask.DecodePlan(q2, k2, v2)
        self.assertGreater(plan2._hit[2][0], plan._hit[2][0])   # a larger workspace
        big = fragmask.decode(q2, k2, v2)
        self.assertTrue(torch.equal(big, plan2.run(q2, k2, v2)))
        self.assertTrue(torch.equal(fragmask.decode(q, k, v), want[0]))
        static = [t.clone() for t in (q, k, v)]
        s = streams[0]
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fragmask.decode(*static)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fragmask.decode(*static)
        new = self.inputs([(B, 1, H, D), (B, Sk, H, D), (B, Sk, H, D)], seed=13)
        for dst, src in zip(static, new):
            dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, plan.run(*new)))

    def test_lightning_fast_path_equals_the_registered_op(self):
        from fragmask import _ops

        B, H, D = 2, 4, 96
        q, k, v = self.inputs([(B, H, 3, D)] * 3)
        kv0 = torch.randn(B, H, D, D, device="cuda")
        slope = torch.rand(H, device="cuda")
        kv_fast, kv_op = kv0.clone(), kv0.clone()
        fast = fragmask.lightning_decode(q, k, v, kv_fast, slope)
        _ops._FAST = False
        try:
            op = fragmask.lightning_decode(q, k, v, kv_op, slope)
        finally:
            _ops._FAST = True
        self.assertTrue(torch.equal(fast, op))
        self.assertTrue(torch.equal(kv_fast, kv_op))

    def test_the_device_api_is_not_reachable_from_the_extension(self):
        ext = fragmask._fragmask
        for name in ("attention_launch", "attention_backward_launch", "decode_launch",
                     "lightning_decode", "gpu_pack_plan", "gpu_transpose_plan"):
            self.assertFalse(hasattr(ext, name), name)
        with self.assertRaisesRegex(RuntimeError, "claimed"):
            ext.claim_device_api()

    def test_decode_shapes_through_attention_use_the_decode_kernel_and_match_sdpa(self):
        from fragmask import _ops

        B, H, Hkv, Sk, D = 3, 8, 2, 3000, 128
        for layout in ("bhsd", "bshd"):
            shapes = [(B, H, 1, D), (B, Hkv, Sk, D), (B, Hkv, Sk, D)]
            if layout == "bshd":
                shapes = [(b, s_, h, d) for b, h, s_, d in shapes]
            q, k, v = self.inputs(shapes, seed=11)
            out, lse = fragmask.attention(q, k, v, layout=layout, return_lse=True)
            self.assertEqual(out.shape, q.shape)
            self.assertEqual(lse.shape, (B, H, 1))
            qb, kb, vb = ((t.transpose(1, 2) if layout == "bshd" else t) for t in (q, k, v))
            kb, vb = (t.repeat_interleave(H // Hkv, dim=1) for t in (kb, vb))
            ref = torch.nn.functional.scaled_dot_product_attention(
                qb.float(), kb.float(), vb.float())
            got = out.transpose(1, 2) if layout == "bshd" else out
            self.assertLess(rel_err(got, ref), 1e-2, layout)
            # The same numbers as the decode kernel called directly, and close to the
            # split-KV forward (splits= forces it).
            dq = q if layout == "bshd" else q.transpose(1, 2).contiguous()
            dk, dv = ((t if layout == "bshd" else t.transpose(1, 2).contiguous())
                      for t in (k, v))
            direct = fragmask.decode(dq, dk, dv)
            direct = direct if layout == "bshd" else direct.transpose(1, 2)
            # (bhsd runs as B·Hkv requests of one kv head: another split plan, so close.)
            self.assertLess(rel_err(out, direct.reshape(out.shape)), 2e-3, layout)
            forced = fragmask.attention(q, k, v, layout=layout, splits=8)
            self.assertLess(rel_err(forced, out), 1e-2, layout)
            self.assertIsNotNone(_ops._decode_plans)


@needs_gpu
class DeterministicBackwardTests(unittest.TestCase):
    """``fragmask.attention(..., deterministic=True)`` (and the default under
    ``torch.use_deterministic_algorithms(True)``): dQ, dK and dV bit-identical over runs
    of the same call, on both autograd paths, and still within the fp32 tolerance; the
    masks whose default kernels have no ordered dQ (a documents mask's grid, a 64x64
    mask's paired key blocks) run the ones that do instead of failing."""

    RUNS = 3

    @classmethod
    def setUpClass(cls):
        fragmask.warmup(head_dims=(128,))

    def inputs(self, B, H, Hk, S, D=128, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        shapes = [(B, H, S, D), (B, Hk, S, D), (B, Hk, S, D), (B, H, S, D)]
        return [torch.randn(s, device="cuda", dtype=torch.bfloat16, generator=g)
                for s in shapes]

    def runs(self, q, k, v, do, fast, **kw):
        """(o, dq, dk, dv) of RUNS forward and backward calls, fresh leaves each."""
        from fragmask import _ops

        got = []
        _ops._FAST = fast
        try:
            for _ in range(self.RUNS):
                qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
                out = fragmask.attention(qg, kg, vg, **kw)
                out.backward(do)
                got.append((out.detach(), qg.grad, kg.grad, vg.grad))
        finally:
            _ops._FAST = True
        torch.cuda.synchronize()
        return got

    def assert_bitwise_equal(self, what, runs):
        for i, run in enumerate(runs[1:], 1):
            for name, a, b in zip(("o", "dq", "dk", "dv"), run, runs[0]):
                self.assertTrue(torch.equal(a, b), f"{what}: {name} of run {i} differs "
                                f"from run 0 (max |diff| {(a.float() - b.float()).abs().max()})")

    def assert_close_to_fp32(self, what, q, k, v, do, got, **ref):
        q, k, v = (t.float().requires_grad_() for t in (q, k, v))
        out = math_attention(q, k, v, **ref)
        out.backward(do.float())
        for name, a, b in zip(("o", "dq", "dk", "dv"), got, (out, q.grad, k.grad, v.grad)):
            self.assertTrue(torch.isfinite(a).all(), f"{what}: {name} not finite")
            self.assertLess(rel_err(a, b.detach()), 2e-2, f"{what}: {name}")

    def modes_of(self, q, mask=None, causal=False, window=None):
        """{(deterministic, paired_keys)} of the eager path's backward plans of the
        forward plans of calls on q's shape with this mask (its registry id), causal and
        window (the plan key's slots 0 and 8 to 10, ``_forward_plan``)."""
        from fragmask import _ops

        mask_id = 0 if mask is None else mask._meta[8]
        return {(key[2], h.paired_keys) for k, e in _ops._fwd_plans.items()
                if k[0] == q.shape and k[8] == mask_id and k[9] == causal and k[10] == window
                for key, h in e[_ops._BWD][6].items()}

    def test_deterministic_gradients_are_bitwise_equal_over_three_runs(self):
        from fragmask import _ops

        B, H, S = 2, 8, 1000
        q, k, v, do = self.inputs(B, H, H, S, seed=41)
        g = torch.Generator(device="cuda").manual_seed(42)
        dense = torch.rand(B, H, S, S, device="cuda", generator=g) < 0.5
        dense[:, :, :, 0] = True
        m = Mask.from_dense(dense, transposed=True)
        # Block-sparse lists packed on the host: the plan uploads their walk orders
        # (fragmask_masks::deterministic_walks), which must keep the runs bit-identical.
        tiles = torch.rand(B, H, 8, 8, device="cuda", generator=g) < 0.3
        sparse = dense & tiles.repeat_interleave(128, 2).repeat_interleave(128, 3)[..., :S, :S]
        sparse[:, :, :, 0] = True
        hm = Mask.from_dense(sparse.cpu(), transposed=True).to("cuda")
        qg, kg, vg, dog = self.inputs(B, H, 2, S, seed=43)     # GQA 8:2
        cases = {
            "causal S=1000 D=128": ((q, k, v, do), dict(causal=True), dict(causal=True)),
            "causal GQA 8:2": ((qg, kg, vg, dog), dict(causal=True), dict(causal=True)),
            "random 50%": ((q, k, v, do), dict(mask=m), dict(mask=dense)),
            "block-sparse host lists": ((q, k, v, do), dict(mask=hm), dict(mask=sparse)),
        }
        real = _ops._backward_launch
        seen = []

        def spy(*args):
            seen.append(args[-1])
            return real(*args)

        for name, (tensors, ours, ref) in cases.items():
            for fast in (True, False):   # the eager autograd.Function, the registered ops
                with self.subTest(case=name, fast=fast):
                    seen.clear()
                    _ops._backward_launch = spy
                    try:
                        runs = self.runs(*tensors, fast, deterministic=True, **ours)
                    finally:
                        _ops._backward_launch = real
                    self.assert_bitwise_equal(f"{name} fast={fast}", runs)
                    self.assert_close_to_fp32(name, *tensors, runs[0], **ref)
                    if fast:
                        self.assertIn((True, False), self.modes_of(tensors[0], **ours))
                        self.assertEqual(seen, [])
                    else:
                        self.assertEqual(seen, [True] * self.RUNS)

    def test_the_default_follows_torchs_flag_at_the_forward(self):
        from fragmask import _ops

        q, k, v, do = self.inputs(1, 4, 4, 520, seed=44)
        flag = torch.are_deterministic_algorithms_enabled()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        real = _ops._backward_launch
        seen = []

        def spy(*args):
            seen.append(args[-1])
            return real(*args)

        try:
            for fast in (True, False):
                with self.subTest(fast=fast):
                    seen.clear()
                    _ops._FAST = fast
                    _ops._backward_launch = spy
                    got = []
                    for _ in range(self.RUNS):
                        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
                        torch.use_deterministic_algorithms(True)
                        out = fragmask.attention(qg, kg, vg, window=(200, 0))
                        # The backward runs in the mode of its forward's call.
                        torch.use_deterministic_algorithms(False)
                        out.backward(do)
                        got.append((out.detach(), qg.grad, kg.grad, vg.grad))
                    torch.cuda.synchronize()
                    self.assert_bitwise_equal(f"torch's flag, fast={fast}", got)
                    if fast:
                        self.assertEqual(self.modes_of(q, window=(200, 0)), {(True, False)})
                    else:
                        self.assertEqual(seen, [True] * self.RUNS)
        finally:
            _ops._FAST = True
            _ops._backward_launch = real
            torch.use_deterministic_algorithms(flag, warn_only=warn_only)

    def test_documents_and_64x64_masks_run_ordered_kernels_instead_of_failing(self):
        # The documents grid has no deterministic dQ order: the choice takes the tile lists.
        # Paired 64-key blocks take their turns by the pair table's ranks: paired in both
        # modes.
        B, H, S = 1, 4, 1000
        q, k, v, do = self.inputs(B, H, H, S, seed=45)
        ids = torch.repeat_interleave(torch.arange(4), torch.tensor([300, 128, 500, 72]))
        docs = (ids[:, None] == ids[None, :]) & torch.ones(S, S, dtype=torch.bool).tril()
        dense64 = torch.rand(B, H, S, S, generator=torch.Generator().manual_seed(47)) < 0.5
        dense64[..., 0] = True                   # on the host: packed there, so paired
        masks = {
            "documents": (Mask.from_predicate("causal", S, doc_ids=ids.numpy())
                          .with_transposed(), docs.cuda()),
            "64x64 host-packed": (Mask.from_dense(dense64, block=(64, 64), transposed=True),
                                  dense64.cuda()),
        }
        for name, (m, dense) in masks.items():
            with self.subTest(mask=name):
                runs = self.runs(q, k, v, do, True, mask=m, deterministic=True)
                self.assert_bitwise_equal(name, runs)
                self.assert_close_to_fp32(name, q, k, v, do, runs[0], mask=dense)
                paired = name.startswith("64x64")
                self.assertEqual(self.modes_of(q, m), {(True, paired)})
                # The same mask without the mode keeps its default (paired for 64x64).
                self.runs(q, k, v, do, True, mask=m, deterministic=False)
                self.assertEqual(self.modes_of(q, m), {(True, paired), (False, paired)})
