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
