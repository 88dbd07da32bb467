"""Tests that need torch (CPU tensors here; GPU ops when a GPU is present). Without
torch every test is reported as skipped, never as passed."""

import importlib.util
import unittest

import numpy as np

import fragmask
from fragmask import Mask

HAVE_TORCH = importlib.util.find_spec("torch") is not None
if HAVE_TORCH:
    import torch
else:
    print("SKIPPED: torch not installed (tests/test_torch.py)")

needs_torch = unittest.skipUnless(HAVE_TORCH, "torch not installed")


@needs_torch
class DoutViewTests(unittest.TestCase):
    """Which dO views the backward reads where they lie (``_dout_as_is``; CPU tensors: the
    rule reads only strides and the address)."""

    def test_contiguous_and_bshd_views_are_read_in_place_and_others_are_copied(self):
        from fragmask._ops import _dout_as_is
        B, S, H, D = 2, 40, 3, 64
        bshd = torch.zeros(B, S, H, D, dtype=torch.bfloat16)
        self.assertTrue(_dout_as_is(bshd.transpose(1, 2)))          # a bshd caller's dO
        self.assertTrue(_dout_as_is(torch.zeros(B, H, S, D, dtype=torch.bfloat16)))
        # D not contiguous, an expanded (stride 0) dO, rows 2 bytes off, a stride of 4
        # elements (8 bytes): each is copied.
        self.assertFalse(_dout_as_is(torch.zeros(B, H, D, S, dtype=torch.bfloat16).transpose(2, 3)))
        self.assertFalse(_dout_as_is(torch.ones(1, 1, 1, D, dtype=torch.bfloat16).expand(B, H, S, D)))
        self.assertFalse(_dout_as_is(torch.zeros(B * H * S * D + 1, dtype=torch.bfloat16)[1:]
                                     .view(B, H, S, D)))
        self.assertFalse(_dout_as_is(torch.zeros(B, H, S, 68, dtype=torch.bfloat16)[..., :D]))


@needs_torch
class GradientLayoutTests(unittest.TestCase):
    """The gradients' allocation and strides for the backward (CPU tensors: metadata only)."""

    def test_gradients_take_the_inputs_memory_order_and_dv_takes_dk_s(self):
        from fragmask._ops import _grad_strides, _grads_like
        B, S, H, Hk, D = 2, 40, 4, 2, 64
        q = torch.zeros(B, S, H, D, dtype=torch.bfloat16).transpose(1, 2)   # bshd memory
        k = torch.zeros(B, S, Hk, D, dtype=torch.bfloat16).transpose(1, 2)
        v = torch.zeros(B, Hk, S, D, dtype=torch.bfloat16)                  # another order
        dq, dk, dv = _grads_like(torch, q, k, v)
        self.assertEqual((dq.shape, dq.stride()), (q.shape, q.stride()))
        self.assertEqual((dk.shape, dk.stride()), (k.shape, k.stride()))
        self.assertEqual((dv.shape, dv.stride()), (v.shape, dk.stride()))
        self.assertEqual(_grad_strides(dq, dk), ((S * H * D, D, H * D), (S * Hk * D, D, Hk * D)))


@needs_torch
class OutArgumentTests(unittest.TestCase):
    """The ``out=`` checks of the eager ops (CPU tensors: the checks read only metadata)."""

    def test_out_of_the_right_shape_dtype_and_memory_is_accepted(self):
        from fragmask._ops import _check_out
        v = torch.zeros(1, 4, 2, 96, dtype=torch.bfloat16)
        q = torch.zeros(1, 4, 2, 96, dtype=torch.bfloat16)
        out = torch.empty_like(v)
        _check_out(torch, "t", out, v, (q,))

    def test_out_that_overlaps_an_input_is_refused(self):
        from fragmask._ops import _check_out
        buf = torch.zeros(2, 1, 4, 2, 96, dtype=torch.bfloat16)
        v, q = buf[0], torch.zeros(1, 4, 2, 96, dtype=torch.bfloat16)
        for out in (v, buf[0]):
            with self.assertRaisesRegex(ValueError, "overlaps"):
                _check_out(torch, "t", out, v, (q,))
        # Disjoint halves of one buffer are fine; a view reaching into the input is not.
        _check_out(torch, "t", buf[1], v, (q,))
        flat = torch.zeros(2 * 4 * 2 * 96 + 1, dtype=torch.bfloat16)
        a, b = flat[:768].view(1, 4, 2, 96), flat[767:1535].view(1, 4, 2, 96)
        with self.assertRaisesRegex(ValueError, "overlaps"):
            _check_out(torch, "t", b, a)

    def test_out_of_another_shape_dtype_or_layout_is_refused(self):
        from fragmask._ops import _check_out
        v = torch.zeros(1, 4, 2, 96, dtype=torch.bfloat16)
        bad = [torch.empty(1, 4, 2, 95, dtype=torch.bfloat16),
               torch.empty(1, 4, 2, 96, dtype=torch.float16),
               torch.empty(1, 4, 96, 2, dtype=torch.bfloat16).transpose(2, 3)]
        for out in bad:
            with self.assertRaises(ValueError):
                _check_out(torch, "t", out, v)
        with self.assertRaises(TypeError):
            _check_out(torch, "t", np.zeros((1, 4, 2, 96)), v)
        with self.assertRaises(ValueError):
            _check_out(torch, "t", torch.zeros(1, 4, 2, 96, dtype=torch.bfloat16,
                                               requires_grad=True), v)


class _StubPlan:
    """A plan stand-in: no workspace, runs that launch nothing (a backward plan's runs
    append its mode to `runs`)."""
    splits = 1
    workspace_floats = (0, 0)

    def __init__(self, deterministic=None, runs=None):
        self.deterministic = deterministic
        self.runs = runs

    def run(self, *args):
        if self.runs is not None:
            self.runs.append(self.deterministic)

    def run_ptrs(self, *args):
        return None


@needs_torch
class DeterministicKeywordTests(unittest.TestCase):
    """Where ``attention``'s ``deterministic=`` goes, on both autograd paths (the eager
    ``autograd.Function`` and the registered ops): CPU tensors posing as device 0's, the
    extension's device calls replaced by recorders (bench/python_wrapper_cpu.py's stubs),
    so these check the keyword's path to the backward plan, not the kernels."""

    def setUp(self):
        from unittest import mock

        from fragmask import _ops
        _ops._torch()
        self.ops = _ops
        self.plans = []     # attention_backward_plan's positional arguments, per call
        self.runs = []      # the mode of each backward plan run (the eager path)
        self.launches = []  # attention_backward_launch's arguments, per call (the op's)

        def plan(*args, **kwargs):
            self.plans.append(args)
            return _StubPlan(args[-1], self.runs)

        api = dict(_ops._API, attention_plan=lambda *a, **k: _StubPlan(),
                   attention_backward_plan=plan)
        patches = [mock.patch.object(torch.Tensor, "get_device", lambda t: 0),
                   mock.patch.dict(_ops._API, api),
                   mock.patch.object(_ops, "_launch", lambda *a, **k: None),
                   mock.patch.object(_ops, "_backward_launch",
                                     lambda *a: self.launches.append(a)),
                   mock.patch.object(_ops, "_get_stream", lambda device: 0),
                   mock.patch.object(_ops, "_check_tensors", lambda *a: None),
                   mock.patch.object(_ops, "_FAST", True)]
        for p in patches:
            p.start()
            self.addCleanup(p.stop)
        # No stub plan outlives the test (a GPU test in this process would find it).
        _ops._fwd_plans.clear()
        self.addCleanup(_ops._fwd_plans.clear)
        flag = torch.are_deterministic_algorithms_enabled()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        self.addCleanup(torch.use_deterministic_algorithms, flag, warn_only=warn_only)
        torch.use_deterministic_algorithms(False)

    def backward(self, fast, flag_at_forward, flag_at_backward, **kw):
        """The mode one forward and backward ran in: the eager path's plan's, or the
        registered backward op's launch's (the last argument of each)."""
        self.ops._FAST = fast
        q, k, v = (torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        torch.use_deterministic_algorithms(flag_at_forward)
        out = fragmask.attention(q, k, v, causal=True, **kw)
        torch.use_deterministic_algorithms(flag_at_backward)
        runs, launches = len(self.runs), len(self.launches)
        out.backward(torch.zeros_like(out))
        torch.use_deterministic_algorithms(False)
        if fast:   # one run of a backward plan, no launch of the op
            self.assertEqual((len(self.runs), len(self.launches)), (runs + 1, launches))
            return self.runs[-1]
        self.assertEqual((len(self.runs), len(self.launches)), (runs, launches + 1))
        return self.launches[-1][-1]

    def test_the_default_follows_torchs_flag_when_the_forward_is_called(self):
        for fast in (True, False):
            with self.subTest(fast=fast):
                self.assertIs(self.backward(fast, False, False), False)
                self.assertIs(self.backward(fast, True, True), True)
                # The backward keeps the mode of its forward's call.
                self.assertIs(self.backward(fast, True, False), True)
                self.assertIs(self.backward(fast, False, True), False)

    def test_true_and_false_override_torchs_flag(self):
        for fast in (True, False):
            with self.subTest(fast=fast):
                self.assertIs(self.backward(fast, False, False, deterministic=True), True)
                self.assertIs(self.backward(fast, True, True, deterministic=False), False)

    def test_the_eager_path_plans_each_mode_once_and_keeps_both(self):
        self.backward(True, False, False)
        self.backward(True, True, True)
        self.backward(True, False, False, deterministic=True)    # cached: no new plan
        self.assertEqual([args[-1] for args in self.plans], [False, True])
        entry = next(iter(self.ops._fwd_plans.values()))
        handles = entry[self.ops._BWD][6]
        self.assertEqual({key[2] for key in handles}, {False, True})
        for key, handle in handles.items():
            self.assertIs(handle.deterministic, key[2])

    def test_other_values_are_type_errors_naming_the_option(self):
        for fast in (True, False):
            self.ops._FAST = fast
            q = torch.zeros(1, 2, 64, 64, dtype=torch.bfloat16, requires_grad=True)
            for bad in (1, "true"):
                with self.subTest(fast=fast, value=bad):
                    with self.assertRaisesRegex(TypeError, "deterministic"):
                        fragmask.attention(q, q, q, deterministic=bad)


@needs_torch
class DistributedDeterministicTests(unittest.TestCase):
    """``fragmask.distributed.attention`` has no deterministic backward: a call that will
    need one refuses ``deterministic=True`` and torch's flag (a warning under
    ``warn_only``) before anything runs; ``deterministic=False`` and forward-only calls
    are not refused (the check alone: ``_refuse_deterministic``)."""

    def setUp(self):
        flag = torch.are_deterministic_algorithms_enabled()
        warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
        self.addCleanup(torch.use_deterministic_algorithms, flag, warn_only=warn_only)

    def test_true_and_torchs_flag_are_refused_and_false_is_not(self):
        import warnings

        from fragmask.distributed._attention import _refuse_deterministic
        torch.use_deterministic_algorithms(False)
        _refuse_deterministic(None)
        _refuse_deterministic(False)
        with self.assertRaisesRegex(RuntimeError, "deterministic=True"):
            _refuse_deterministic(True)
        torch.use_deterministic_algorithms(True)
        with self.assertRaisesRegex(RuntimeError, "use_deterministic_algorithms"):
            _refuse_deterministic(None)
        _refuse_deterministic(False)
        torch.use_deterministic_algorithms(True, warn_only=True)
        with self.assertWarnsRegex(UserWarning, "deterministic=False"):
            _refuse_deterministic(None)
        with self.assertRaisesRegex(RuntimeError, "deterministic=True"):
            _refuse_deterministic(True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _refuse_deterministic(False)
        with self.assertRaisesRegex(TypeError, "deterministic"):
            _refuse_deterministic(1)

    def test_a_call_needing_a_backward_is_refused_before_it_runs(self):
        import fragmask.distributed as fd
        from fragmask.distributed import _attention as A

        S, D = 256, 16
        plan = fd.plan(fd.Intervals.causal(S), 1)
        q, k, v = (torch.zeros(1, 2, S, D, dtype=torch.float64, requires_grad=True)
                   for _ in range(3))

        def ran(*args, **kwargs):
            raise AssertionError("the forward ran")

        saved = A._overlapped_fn, A._overlapped_forward, A._fm_attention
        A._overlapped_fn = A._overlapped_forward = A._fm_attention = ran
        try:
            for overlap in (True, False):
                with self.subTest(overlap=overlap):
                    with self.assertRaisesRegex(RuntimeError, "deterministic"):
                        fd.attention(q, k, v, plan, deterministic=True, overlap=overlap)
                    torch.use_deterministic_algorithms(True)
                    try:
                        with self.assertRaisesRegex(RuntimeError, "deterministic"):
                            fd.attention(q, k, v, plan, overlap=overlap)
                    finally:
                        torch.use_deterministic_algorithms(False)
        finally:
            A._overlapped_fn, A._overlapped_forward, A._fm_attention = saved


@needs_torch
class TorchCpuTests(unittest.TestCase):
    def test_from_dense_takes_cpu_tensors(self):
        g = torch.Generator().manual_seed(0)
        for dtype in (torch.bool, torch.uint8, torch.int8):
            t = (torch.rand(2, 130, 260, generator=g) < 0.4).to(dtype)
            m = Mask.from_dense(t)
            np.testing.assert_array_equal(m.to_dense()[0], t.numpy() != 0)
        t = torch.rand(64, 64, generator=g) < 0.5
        self.assertEqual(Mask.from_dense(t.T), Mask.from_dense(t.numpy().T))
        with self.assertRaises(TypeError):
            Mask.from_dense(torch.zeros(4, 4))

    def test_from_topk_takes_tensors(self):
        idx = torch.tensor([[0, 5, -1], [3, 2, 1]])
        m = Mask.from_topk(idx, 8)
        self.assertEqual(m, Mask.from_topk(idx.numpy(), 8))

    def test_flex_block_mask_lists_and_mask_mod(self):
        from torch.nn.attention.flex_attention import BlockMask

        g = torch.Generator().manual_seed(1)
        dense = torch.rand(1, 2, 300, 400, generator=g) < 0.5
        dense[..., :128, :128] = True
        m = Mask.from_dense(dense)
        bm = m.to_flex_block_mask(device="cpu")
        self.assertIsInstance(bm, BlockMask)
        np.testing.assert_array_equal(bm.kv_num_blocks.numpy(), m.kv_num_blocks)
        np.testing.assert_array_equal(bm.kv_indices.numpy(), m.kv_indices)
        np.testing.assert_array_equal(bm.full_kv_num_blocks.numpy(), m.full_kv_num_blocks)
        np.testing.assert_array_equal(bm.full_kv_indices.numpy(), m.full_kv_indices)
        self.assertEqual(tuple(bm.BLOCK_SIZE), (128, 128))
        b, h, q, k = torch.meshgrid(torch.arange(1), torch.arange(2), torch.arange(300),
                                    torch.arange(400), indexing="ij")
        np.testing.assert_array_equal(bm.mask_mod(b, h, q, k).numpy(), dense.numpy())

    def test_attention_rejects_cpu_tensors_and_non_tensors(self):
        q = torch.zeros(1, 2, 8, 64, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "q is on cpu"):
            fragmask.attention(q, q, q)
        with self.assertRaises(TypeError):
            fragmask.attention("q", q, q)


if __name__ == "__main__":
    unittest.main()
