"""CPU tests of the fragmask Python package (numpy only; run by scripts/test.sh)."""

import os
import pickle
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import numpy as np

import fragmask
from fragmask import FileError, Mask
from fragmask._flex import make_mask_mod, tile_tables

REPO = Path(__file__).resolve().parents[3]
TILES = [
    dict(block=(128, 128), warpgroups=2),
    dict(block=(64, 64), warpgroups=1),
    dict(block=(128, 64), warpgroups=1, encoding="quad-lane"),
    dict(block=(64, 128), warpgroups=1, swap_ab=True, encoding="row-major"),
]


def broadcast4(dense):
    """A 2-, 3- or 4-D mask as [B, H, Sq, Sk] bool."""
    d = np.asarray(dense) != 0
    while d.ndim < 4:
        d = d[None]
    return d


def predicate_dense(sq, sk, fn):
    q = np.arange(sq)[:, None]
    k = np.arange(sk)[None, :]
    return np.broadcast_to(fn(q, k), (sq, sk))


class TempDir:
    def __enter__(self):
        self.path = Path(tempfile.mkdtemp(prefix="fragmask-py-"))
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path)


class LayoutTests(unittest.TestCase):
    def test_layout_result_has_cli_text_shape_and_stride(self):
        r = fragmask.layout("composition((6,2):(8,2),(4,3):(3,1))")
        self.assertEqual(str(r), "((2,2),3):((24,2),8)")
        self.assertEqual(r.text, "((2,2),3):((24,2),8)")
        self.assertEqual(r.kind, "layout")
        self.assertEqual(r.shape, ((2, 2), 3))
        self.assertEqual(r.stride, ((24, 2), 8))
        self.assertIsNone(r.value)
        with self.assertRaises(TypeError):
            int(r)

    def test_zipped_divide_matches_readme(self):
        r = fragmask.layout("zipped_divide((64,128):(1,64), <64:1,16:1>)")
        self.assertEqual(r.text, "((64,16),(1,8)):((1,64),(0,1024))")
        self.assertEqual(r.shape, ((64, 16), (1, 8)))

    def test_integer_results_are_ints(self):
        r = fragmask.layout("eval(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)), 37, 5)")
        self.assertEqual((r.kind, r.value, int(r), r.text), ("int", 721, 721, "721"))
        self.assertIsNone(r.shape)
        self.assertEqual(fragmask.layout("size((4,8):(8,1))").value, 32)

    def test_notes_are_returned(self):
        r = fragmask.layout("left_inverse((1,2,4):(4,1,8))")
        self.assertEqual(r.text, "(8,4):(1,2)")
        self.assertTrue(any("pycute" in n for n in r.notes), r.notes)

    def test_malformed_expression_raises_value_error_with_caret(self):
        with self.assertRaises(ValueError) as cm:
            fragmask.layout("composition((4,4):(4,1), (2,2):(1,4")
        self.assertEqual(
            str(cm.exception),
            "column 36: expected ',' or ')'\n  composition((4,4):(4,1), (2,2):(1,4\n"
            + " " * 37 + "^",
        )
        with self.assertRaises(TypeError):
            fragmask.layout(42)


class DenseTests(unittest.TestCase):
    def test_dense_round_trips_exactly_for_every_rank_dtype_and_tile(self):
        rng = np.random.default_rng(1)
        shapes = [(200, 333), (3, 130, 70), (2, 2, 129, 257), (1, 3, 64, 64)]
        for shape in shapes:
            for dtype in (np.bool_, np.uint8, np.int8):
                dense = (rng.random(shape) < 0.3).astype(dtype)
                if dtype is np.uint8:
                    dense *= 7  # nonzero = keep
                for tile in TILES:
                    with self.subTest(shape=shape, dtype=dtype, tile=tile):
                        m = Mask.from_dense(dense, **tile)
                        expect = broadcast4(dense)
                        self.assertEqual(m.shape, expect.shape)
                        got = m.to_dense()
                        self.assertEqual(got.dtype, np.bool_)
                        np.testing.assert_array_equal(got, expect)
                        self.assertAlmostEqual(m.density(), expect.mean())

    def test_a_64_token_masks_shared_kv_load_ratio_is_what_its_pairs_load(self):
        # Causal over 16 query blocks: blocks 2i and 2i+1 list keys 0..=2i and 0..=2i+1, so
        # a pair loads 2i + 2 of its 4i + 3 entries: 72 of 136 in all (fragmask inspect's
        # figure). Query blocks that keep the same keys load half; other tiles have no ratio.
        causal = Mask.from_predicate("causal", 1024, block=(64, 64), warpgroups=1)
        self.assertAlmostEqual(causal.shared_kv_load_ratio(), 72 / 136)
        keep = np.random.default_rng(3).random((8, 16)) < 0.3
        dense = np.repeat(np.repeat(np.repeat(keep, 2, 0), 64, 0), 64, 1)
        alike = Mask.from_dense(dense, block=(64, 64), warpgroups=1)
        self.assertAlmostEqual(alike.shared_kv_load_ratio(), 0.5)
        self.assertIsNone(Mask.from_predicate("causal", 1024).shared_kv_load_ratio())

    def test_full_and_empty_tiles_are_classified(self):
        dense = np.zeros((256, 384), bool)
        dense[:128, :128] = True  # full
        dense[128:, 128:256] = True  # full
        dense[5, 300] = True  # partial
        m = Mask.from_dense(dense)
        s = m.stats()
        self.assertEqual((s["full"], s["partial"], s["empty"], s["tiles"]), (2, 1, 3, 6))
        np.testing.assert_array_equal(m.full_kv_num_blocks, [[[1, 1]]])
        np.testing.assert_array_equal(m.full_kv_indices[0, 0, :, 0], [0, 1])
        np.testing.assert_array_equal(m.kv_num_blocks, [[[1, 0]]])
        self.assertEqual(m.kv_indices[0, 0, 0, 0], 2)
        self.assertEqual(m.kv_tile_offsets[0, 0, 0, 0], 0)
        self.assertEqual(m.kv_tile_offsets[0, 0, 0, 1], -1)
        self.assertEqual(m.words.shape, (1, 256, 2))
        self.assertEqual(m.words.dtype, np.uint32)
        self.assertEqual(m.kv_indices.dtype, np.int32)
        self.assertEqual(int(np.unpackbits(m.words.view(np.uint8)).sum()), 1)

    def test_non_contiguous_and_list_inputs(self):
        rng = np.random.default_rng(2)
        base = rng.random((300, 200)) < 0.5
        view = base.T[::1, ::2]  # strided view
        np.testing.assert_array_equal(Mask.from_dense(view).to_dense()[0, 0], view)
        rows = [[True, False, True], [False, False, True]]
        np.testing.assert_array_equal(Mask.from_dense(rows).to_dense()[0, 0], rows)

    def test_fragment_native_bits_follow_the_documented_closed_form(self):
        # docs/masks.md, "FragmentNative, exactly": bit b of word w of thread t is
        # element coord(t, 32 w + b) of the tile.
        rng = np.random.default_rng(3)
        dense = rng.random((128, 128)) < 0.5
        m = Mask.from_dense(dense)
        words = m.words[0]  # [256 threads, 2 words]
        t, v = np.meshgrid(np.arange(256), np.arange(64), indexing="ij")
        n = 128
        mma_m, r = v // (n // 2), v % (n // 2)
        lane, warp, wg = t % 32, (t // 32) % 4, t // 128
        row = 64 * (wg + 2 * mma_m) + 16 * warp + lane // 4 + 8 * ((r // 2) % 2)
        col = 8 * (r // 4) + 2 * (lane % 4) + r % 2
        bits = (words[t, v // 32] >> (v % 32).astype(np.uint32)) & 1
        np.testing.assert_array_equal(bits.astype(bool), dense[row, col])


def _every_builder(seed):
    """A random [2, 200, 300] dense mask and the four mask constructors, each as a function of
    the tile keywords, on sources of that shape (dense, top-k, block lists, predicate)."""
    rng = np.random.default_rng(seed)
    dense = rng.random((2, 200, 300)) < 0.5
    idx = np.stack([rng.permutation(300)[:7] for _ in range(200)])
    index, num = np.array([[0, 2], [1, 3], [3, 0], [2, 1]]), np.array([2, 1, 0, 2])
    return dense, {
        "dense": lambda **t: Mask.from_dense(dense, **t),
        "topk": lambda **t: Mask.from_topk(idx, 300, **t),
        "blocks": lambda **t: Mask.from_blocks(index, num, seqlen_k=250, **t),
        "predicate": lambda **t: Mask.from_predicate("causal,window=70:0", 200, 300, **t),
    }


class TileTests(unittest.TestCase):
    def test_64_token_tiles_from_every_builder_get_one_warpgroup(self):
        _, builders = _every_builder(4)
        for name, build in builders.items():
            with self.subTest(builder=name):
                m = build(block=(64, 64))
                self.assertEqual((m.block, m.warpgroups, m.swap_ab), ((64, 64), 1, False))
                self.assertEqual(m, build(block=(64, 64), warpgroups=1))
                B, H, Sq, Sk = m.shape
                self.assertEqual(m.kv_num_blocks.shape, (B, H, -(-Sq // 64)))
                self.assertEqual(m.kv_indices.shape[-1], -(-Sk // 64))
                self.assertEqual(m.words.shape[1:], (128, 1))  # 128 threads x 1 word
                np.testing.assert_array_equal(m.to_dense(), build().to_dense())
                self.assertEqual(Mask.from_bytes(m.to_bytes()), m)
        # The 128-row block keeps the attention kernel's 2 warpgroups; swap_ab counts
        # block_n as the MMA's M side.
        self.assertEqual(Mask.from_predicate("causal", 100).warpgroups, 2)
        self.assertEqual(Mask.from_predicate("causal", 100, block=(64, 128),
                                             swap_ab=True).warpgroups, 2)
        self.assertEqual(Mask.from_predicate("causal", 100, block=(192, 64)).warpgroups, 1)

    def test_head_dim_packs_at_the_tile_its_attention_kernel_runs(self):
        dense, builders = _every_builder(5)
        # The CLI's tiles (AttentionKernel::default_geometry): 192x128 over 3 warpgroups at
        # head dim 64, 128x128 over 2 at 128, 128x80 over 2 at 256.
        tiles = {64: ((192, 128), 3), 128: ((128, 128), 2), 256: ((128, 80), 2)}
        for name, build in builders.items():
            for d, tile in tiles.items():
                with self.subTest(builder=name, head_dim=d):
                    m = build(head_dim=d)
                    self.assertEqual((m.block, m.warpgroups), tile)
                    self.assertEqual(m, build(block=tile[0], warpgroups=tile[1]))
                    np.testing.assert_array_equal(m.to_dense(), build().to_dense())
            with self.subTest(builder=name, given="block"):
                # A given tile wins over the head dim's.
                self.assertEqual(build(block=(64, 64), head_dim=64).block, (64, 64))
                self.assertEqual(build().block, (128, 128))
        # A mask for the backward too keeps the tile the backward is checked on.
        self.assertEqual(Mask.from_dense(dense, head_dim=64, transposed=True).block, (128, 128))
        for bad, error in ((100, ValueError), (0, ValueError), (64.0, TypeError), (True, TypeError)):
            with self.subTest(head_dim=bad):
                with self.assertRaises(error):
                    Mask.from_dense(dense, head_dim=bad)
                with self.assertRaises(error):
                    Mask.from_dense(dense, head_dim=bad, transposed=True)


    def test_the_backward_reads_every_training_tile_and_refuses_only_forward_ones(self):
        # The tiles masks are made at for training (the default, 64x64, head_dim= with
        # transposed=True) are read by the backward at every head dim; the forward's
        # head-dim tiles 192x128 (64) and 128x80 (256) are not, and are named.
        refusal = fragmask._fragmask.backward_tile_refusal
        dense, _ = _every_builder(6)
        for d in (64, 128, 256):
            with self.subTest(head_dim=d):
                for block in ((128, 128), (64, 64),
                              Mask.from_dense(dense, head_dim=d, transposed=True).block):
                    self.assertIsNone(refusal(d, *block), (d, block))
                forward = Mask.from_dense(dense, head_dim=d).block
                why = refusal(d, *forward)
                if forward == (128, 128):
                    self.assertIsNone(why, (d, forward))
                else:
                    self.assertIsInstance(why, str)
                    self.assertIn("%dx%d mask tile" % forward, why)
        self.assertIsNotNone(refusal(96, 128, 128))  # no backward at head dim 96


class SourceTests(unittest.TestCase):
    def test_topk_fixed_k_with_padding(self):
        rng = np.random.default_rng(4)
        H, Sq, Sk, k = 2, 150, 500, 9
        idx = np.stack([np.stack([rng.choice(Sk, k, replace=False) for _ in range(Sq)])
                        for _ in range(H)]).astype(np.int32)
        idx[:, ::7, -3:] = -1
        expect = np.zeros((1, H, Sq, Sk), bool)
        for h in range(H):
            for q in range(Sq):
                expect[0, h, q, idx[h, q][idx[h, q] >= 0]] = True
        for tile in TILES[:2]:
            m = Mask.from_topk(idx, Sk, **tile)
            np.testing.assert_array_equal(m.to_dense(), expect)
        np.testing.assert_array_equal(Mask.from_topk(idx.astype(np.int16), Sk).to_dense(),
                                      expect)

    def test_topk_csr(self):
        rng = np.random.default_rng(5)
        B, H, Sq, Sk = 2, 3, 40, 300
        rows = [np.sort(rng.choice(Sk, rng.integers(0, 20), replace=False))
                for _ in range(B * H * Sq)]
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
        indices = np.concatenate(rows)
        expect = np.zeros((B, H, Sq, Sk), bool)
        for i, r in enumerate(rows):
            expect[i // (H * Sq), (i // Sq) % H, i % Sq, r] = True
        m = Mask.from_topk(indices, Sk, offsets=offsets, batch=B, heads=H)
        np.testing.assert_array_equal(m.to_dense(), expect)
        m2 = Mask.from_topk(indices, Sk, offsets=offsets, batch=B, seqlen_q=Sq)
        self.assertEqual(m, m2)

    def test_block_lists_of_writeup_002(self):
        rng = np.random.default_rng(6)
        H, Qb, Kb, maxk, bs = 2, 5, 6, 4, 64
        index = np.stack([np.stack([rng.permutation(Kb)[:maxk] for _ in range(Qb)])
                          for _ in range(H)])
        num = rng.integers(0, maxk + 1, (H, Qb))
        sizes = np.array([64, 10, 64, 0, 33, 64])
        q = np.arange(Qb * bs)[:, None]
        k = np.arange(Kb * bs)[None, :]
        expect = np.zeros((1, H, Qb * bs, Kb * bs), bool)
        for h in range(H):
            listed = np.zeros((Qb, Kb), bool)
            for qb in range(Qb):
                listed[qb, index[h, qb, :num[h, qb]]] = True
            expect[0, h] = listed[q // bs, k // bs] & (k % bs < sizes[k // bs])
        m = Mask.from_blocks(index, num, sizes)
        np.testing.assert_array_equal(m.to_dense(), expect)
        whole = Mask.from_blocks(index, num, seqlen_k=Kb * bs, block=(64, 64),
                                 warpgroups=1)
        self.assertEqual(whole.shape, (1, H, Qb * bs, Kb * bs))
        np.testing.assert_array_equal(whole.to_dense(), Mask.from_blocks(
            index, num, np.full(Kb, bs)).to_dense())
        # Shorter sequences than Qb*bs: the lists cover ceil(S / bs) blocks.
        short = Mask.from_blocks(index, num, sizes, seqlen_q=Qb * bs - 5)
        np.testing.assert_array_equal(short.to_dense(), expect[:, :, :Qb * bs - 5])

    def test_predicates_equal_their_definitions(self):
        sq, sk = 190, 260
        off = sk - sq
        cases = {
            "causal": lambda q, k: k <= q + off,
            "causal@top-left": lambda q, k: k <= q,
            "window=16:3": lambda q, k: (k >= q + off - 16) & (k <= q + off + 3),
            "prefix=40@top-left | window=0:0": lambda q, k: (k < 40) | (k <= q)
            | (k == q + off),
            "!(window=8:8), causal": lambda q, k: ~((k >= q + off - 8) & (k <= q + off + 8))
            & (k <= q + off),
            "all": lambda q, k: np.ones_like(q + k, bool),
            "none": lambda q, k: np.zeros_like(q + k, bool),
        }
        for text, fn in cases.items():
            for tile in TILES[:2]:
                with self.subTest(predicate=text, tile=tile):
                    m = Mask.from_predicate(text, sq, sk, **tile)
                    np.testing.assert_array_equal(m.to_dense()[0, 0],
                                                  predicate_dense(sq, sk, fn))

    def test_document_ids(self):
        S = 300
        ids = np.repeat([0, 1, 2, 3], [50, 120, 1, 129])
        same = ids[:, None] == ids[None, :]
        causal = predicate_dense(S, S, lambda q, k: k <= q)
        m = Mask.from_predicate("causal", S, doc_ids=ids)
        np.testing.assert_array_equal(m.to_dense()[0, 0], causal & same)
        named = Mask.from_predicate("causal | doc=d", S, doc_ids={"d": ids})
        np.testing.assert_array_equal(named.to_dense()[0, 0], causal | same)
        single = Mask.from_predicate("!doc=anything", S, doc_ids=ids)
        np.testing.assert_array_equal(single.to_dense()[0, 0], ~same)
        # Per-batch ids [B, S], unsorted.
        rng = np.random.default_rng(7)
        batch_ids = rng.integers(0, 3, (2, S))
        mb = Mask.from_predicate("all", S, S, doc_ids=batch_ids)
        self.assertEqual(mb.shape, (2, 1, S, S))
        for b in range(2):
            np.testing.assert_array_equal(mb.to_dense()[b, 0],
                                          batch_ids[b][:, None] == batch_ids[b][None, :])


    def test_documents_survive_bytes_and_pickle(self):
        # Causal (or full) within contiguous documents keeps the documents, which the
        # forward runs on its documents grid; the file stores them (docs/masks.md).
        S = 300
        ids = np.repeat([0, 1, 2, 3], [50, 120, 1, 129])
        for text, kind in (("causal", "causal"), ("all", "full")):
            m = Mask.from_predicate(text, S, doc_ids=ids)
            self.assertEqual(m.metadata()["documents"], kind)
            for back in (Mask.from_bytes(m.to_bytes()), pickle.loads(pickle.dumps(m))):
                self.assertEqual(back, m)
                self.assertEqual(back.metadata()["documents"], kind)
        # Not documents: another predicate, unsorted ids.
        self.assertNotIn("documents", Mask.from_predicate("causal | doc=d", S, doc_ids={"d": ids}).metadata())
        self.assertNotIn("documents", Mask.from_predicate("causal", S, doc_ids=ids[::-1].copy()).metadata())


class FileTests(unittest.TestCase):
    def test_save_load_round_trip_leaves_only_the_file(self):
        rng = np.random.default_rng(8)
        for tile in TILES:
            m = Mask.from_dense(rng.random((2, 1, 100, 300)) < 0.4, **tile)
            with TempDir() as d:
                m.save(d / "m.safetensors")
                self.assertEqual(os.listdir(d), ["m.safetensors"])
                back = Mask.load(str(d / "m.safetensors"))
                self.assertEqual(back, m)
                np.testing.assert_array_equal(back.to_dense(), m.to_dense())
                self.assertEqual(back.metadata()["format"], "fragmask-masks")
                # Overwrites a regular file whole.
                other = Mask.from_predicate("causal", 100, 300, **tile)
                other.save(d / "m.safetensors")
                self.assertEqual(Mask.load(d / "m.safetensors"), other)
                self.assertEqual(os.listdir(d), ["m.safetensors"])

    def test_bytes_and_pickle_round_trip(self):
        m = Mask.from_predicate("window=30:0", 500, 700)
        self.assertEqual(Mask.from_bytes(m.to_bytes()), m)
        self.assertEqual(pickle.loads(pickle.dumps(m)), m)
        self.assertNotEqual(m, Mask.from_predicate("window=31:0", 500, 700))
        self.assertNotEqual(m, "a string")

    def test_file_from_the_cli_loads(self):
        binary = Path(os.environ.get("FRAGMASK_BIN", REPO / "target" / "debug" / "fragmask"))
        if not binary.is_file():
            if os.environ.get("CI") == "true":
                self.fail(f"{binary} missing (scripts/test.sh builds it before these tests)")
            self.skipTest(f"{binary} not built")
        with TempDir() as d:
            out = d / "cli.safetensors"
            subprocess.run([str(binary), "pack", "--predicate", "causal,window=100:0",
                            "--seqlen-q", "333", "--seqlen-k", "555", "--block", "64x128",
                            "--warpgroups", "1", "-q", "-o", str(out)], check=True)
            m = Mask.from_predicate("causal,window=100:0", 333, 555, block=(64, 128),
                                    warpgroups=1)
            self.assertEqual(Mask.load(out), m)
            self.assertEqual(Mask.from_bytes(out.read_bytes()), m)


class TransposedTests(unittest.TestCase):
    def test_transposed_lists_list_every_tile_of_each_key_block(self):
        rng = np.random.default_rng(4)
        dense = rng.random((2, 300, 420)) < 0.05
        dense[:, :128, :128] = True          # one full tile per head
        for block in ((128, 128), (64, 64)):
            m = Mask.from_dense(dense, block=block)
            self.assertFalse(m.has_transposed)
            with self.assertRaisesRegex(ValueError, "--transposed"):
                m.q_num_blocks
            t = m.with_transposed()
            self.assertTrue(t.has_transposed)
            self.assertEqual(t, Mask.from_bytes(t.to_bytes()))
            # Transposing the forward lists by hand gives the q lists, ascending.
            B, H, Mb = m.kv_num_blocks.shape
            Nb = m.kv_indices.shape[-1]
            for h in range(H):
                for n in range(Nb):
                    partial = [i for i in range(Mb)
                               if n in m.kv_indices[0, h, i, :m.kv_num_blocks[0, h, i]]]
                    full = [i for i in range(Mb)
                            if n in m.full_kv_indices[0, h, i, :m.full_kv_num_blocks[0, h, i]]]
                    self.assertEqual(t.q_num_blocks[0, h, n], len(partial))
                    self.assertEqual(list(t.q_indices[0, h, n, :len(partial)]), partial)
                    self.assertEqual(t.full_q_num_blocks[0, h, n], len(full))
                    self.assertEqual(list(t.full_q_indices[0, h, n, :len(full)]), full)
            self.assertEqual(t.q_words.shape[0], len(m.words))
            with TempDir() as d:
                t.save(d / "t.safetensors")
                self.assertEqual(Mask.load(d / "t.safetensors"), t)
                self.assertEqual(Mask.load(d / "t.safetensors").metadata()["transposed"], "true")

    def test_both_directions_are_block_lists_named_as_flexattention_names_them(self):
        dense = np.random.default_rng(5).random((2, 300, 420)) < 0.1
        m = Mask.from_dense(dense, block=(64, 64), transposed=True)
        B, H, Sq, Sk = m.shape
        Mb, Nb = -(-Sq // 64), -(-Sk // 64)
        for lists, prefix, (rows, listed) in ((m.lists, "kv", (Mb, Nb)),
                                              (m.transposed_lists, "q", (Nb, Mb))):
            self.assertIsInstance(lists, fragmask.BlockLists)
            self.assertEqual(lists._fields, ("num_blocks", "indices", "full_num_blocks",
                                             "full_indices", "tile_offsets"))
            for field in lists._fields:
                name = (f"full_{prefix}_{field[5:]}" if field.startswith("full_")
                        else f"{prefix}_{field}")
                value = getattr(lists, field)
                np.testing.assert_array_equal(value, getattr(m, name), err_msg=name)
                self.assertEqual(value.dtype, np.int32, name)
                counts = field.endswith("num_blocks")
                self.assertEqual(value.shape, (B, H, rows) if counts else (B, H, rows, listed))
            # Entries past a row's count: 0 in the indices, -1 in the tile offsets.
            j = np.arange(listed)
            past = j >= lists.num_blocks[..., None]
            self.assertTrue((lists.indices[past] == 0).all())
            self.assertTrue((lists.tile_offsets[past] == -1).all())
            # Every partial tile is referenced once, in each direction.
            used = np.sort(lists.tile_offsets[~past])
            np.testing.assert_array_equal(used, np.arange(len(m.words)))
        with self.assertRaisesRegex(ValueError, "--transposed"):
            Mask.from_dense(dense, block=(64, 64)).transposed_lists

    def test_block_lists_from_a_packer_buffer_are_the_lists_it_holds(self):
        # The GPU packers' int32 output: counts, full counts, then indices, full
        # indices, tile offsets (the extension's list_offsets); torch views of it are
        # stood in for by a minimal numpy wrapper with torch's slicing and view(*shape).
        class Flat:
            def __init__(self, a):
                self.a = a

            def __getitem__(self, s):
                return Flat(self.a[s])

            def view(self, *shape):
                return self.a.reshape(shape)

        dense = np.random.default_rng(6).random((2, 200, 333)) < 0.2
        m = Mask.from_dense(dense, block=(64, 64), transposed=True)
        for lists in (m.lists, m.transposed_lists):
            rows, tiles = lists.num_blocks.size, lists.indices.size
            buf = np.concatenate([lists.num_blocks.ravel(), lists.full_num_blocks.ravel(),
                                  lists.indices.ravel(), lists.full_indices.ravel(),
                                  lists.tile_offsets.ravel()])
            views = fragmask.BlockLists.from_buffer(Flat(buf), rows, tiles,
                                                    lists.num_blocks.shape,
                                                    lists.indices.shape)
            for field, a, b in zip(lists._fields, views, lists):
                np.testing.assert_array_equal(a, b, err_msg=field)

    def test_from_dense_transposed_adds_the_default_lists(self):
        dense = np.random.default_rng(9).random((3, 200, 333)) < 0.4
        for block in ((128, 128), (64, 64)):
            m = Mask.from_dense(dense, block=block, transposed=True)
            self.assertTrue(m.has_transposed)
            self.assertEqual(m, Mask.from_dense(dense, block=block).with_transposed())
            np.testing.assert_array_equal(
                m.q_words, Mask.from_dense(dense, block=block).with_transposed().q_words)
        with self.assertRaises(TypeError):
            Mask.from_dense(dense).with_transposed(warpgroups="2")

    def test_bad_backward_tiles_are_value_errors(self):
        m = Mask.from_predicate("causal", 256, 256)
        with self.assertRaises(ValueError):
            m.with_transposed(warpgroups=7)
        with self.assertRaises(ValueError):
            m.with_transposed(threads=1 << 20)


class _Reader:
    """Stands in for the extension's GpuPack or GpuTranspose, which need a GPU: its
    registry entry is `entry`'s (the real one registers its geometry, empty lists), and
    `finish` returns what `read` gives, a real host `Packed` as the real one reads back,
    counting the calls (each is a wait for the GPU)."""

    def __init__(self, entry, read):
        self.entry, self.registry_id = entry, entry.registry_id   # kept alive, as there
        self.shape, self.tile = entry.shape, entry.tile
        self.read, self.calls = read, 0

    def finish(self, *host):
        self.calls += 1
        return self.read(*host)


class ReadBackTests(unittest.TestCase):
    """``Mask.to("cpu")`` and the registry entry the ops plan with (``Mask._meta[8]``,
    ``_ops._backward_id``): a mask whose lists were read back plans with its host copy,
    one not read back with its geometry. The reading itself is GPU-only (tests/test_gpu.py
    runs it); here it returns the CPU packer's masks."""

    def setUp(self):
        from fragmask import _ops

        self.ops = _ops
        dense = np.random.default_rng(8).random((2, 200, 300)) < 0.3
        self.tile = dict(block=(64, 64))
        self.host = Mask.from_dense(dense, **self.tile)
        self.empty = Mask.from_dense(np.zeros_like(dense), **self.tile)   # a geometry

    def gpu_mask(self, transposed):
        """A mask as from_dense(cuda, transposed=...) leaves it (nothing read back)."""
        pack = _Reader(self.empty._host, lambda: fragmask._fragmask.from_bytes(
            self.host.to_bytes()))
        m = Mask._from_gpu(pack, None, 0)
        if transposed:
            m._gpu_t = (self.transposer(), None, 0)
        return m, pack

    def transposer(self):
        geometry = self.empty.with_transposed()._host
        return _Reader(geometry, lambda host: host.with_transposed(None, True, 0))

    def test_a_host_packed_mask_is_on_the_host_already(self):
        m = self.host.with_transposed()
        before = m._meta
        self.assertIs(m.to("cpu"), m)
        self.assertIs(m.to("cpu:0"), m)
        self.assertEqual(m._meta, before)

    def test_reading_back_switches_the_forward_and_backward_to_the_host_copy(self):
        for transposed in (False, True):
            with self.subTest(transposed=transposed):
                m, pack = self.gpu_mask(transposed)
                self.assertEqual(m._meta[8], self.empty._meta[8])   # the geometry's
                self.assertIsNone(m._host)
                self.assertEqual(m.has_transposed, transposed)
                if transposed:
                    planned = m._gpu_t[0].registry_id
                    self.assertEqual(self.ops._backward_id(planned, m), planned)
                self.assertIs(m.to("cpu"), m)
                self.assertEqual(pack.calls, 1)
                self.assertEqual(m._meta[:8], self.host._meta[:8])
                self.assertEqual(m._meta[8], m._host.registry_id)
                self.assertNotIn(m._meta[8], (self.empty._meta[8], self.host._meta[8]))
                self.assertEqual(m, self.host.with_transposed() if transposed else self.host)
                if transposed:
                    self.assertEqual(m._gpu_t[0].calls, 1)
                    self.assertTrue(m._host.has_transposed)
                    # The backward plans with the host copy, whose q_* lists are the
                    # ones read back.
                    self.assertEqual(self.ops._backward_id(planned, m), m._meta[8])
                    np.testing.assert_array_equal(
                        m.q_tile_offsets, self.host.with_transposed().q_tile_offsets)
                m.to("cpu")
                m.stats()
                self.assertEqual(pack.calls, 1)   # read once
        # Any host list reads back as well (stats here), with the same switch.
        m, pack = self.gpu_mask(False)
        m.stats()
        self.assertEqual((pack.calls, m._meta[8]), (1, m._host.registry_id))

    def test_transposed_lists_a_backward_built_are_read_back_and_replanned(self):
        m, pack = self.gpu_mask(False)
        m.to("cpu")
        mid = m._meta[8]
        # As _ops._device_transposed leaves a backward's own lists on cuda:0: a mask
        # sharing m's pack and host copy, transposed on the GPU, not read back.
        src = Mask._from_gpu(pack, None, 0)
        src._gpu, src._host, src._meta = m._gpu, m._host, m._meta
        src._gpu_t = (self.transposer(), None, 0)
        planned = src._gpu_t[0].registry_id
        m._device_cache["cuda:0:transposed"] = ((), planned, src)
        key = (None,) * 8 + (mid,)     # a forward plan of m with a backward plan
        handles = {(1, 2, 3, 4): "a backward plan"}
        self.ops._fwd_plans[key] = (None,) * self.ops._BWD + ((None,) * 6 + (handles, []),)
        try:
            self.assertEqual(self.ops._backward_id(planned, src), planned)
            m.to("cpu")
            self.assertEqual(handles, {})   # the next backward plans again
        finally:
            self.ops._fwd_plans.pop(key, None)
        self.assertEqual(pack.calls, 1)   # the forward lists were not read again
        self.assertEqual(src._gpu_t[0].calls, 1)
        self.assertEqual(m._meta[8], mid)
        self.assertEqual(self.ops._backward_id(planned, src), src._host.registry_id)
        self.assertTrue(src._host.has_transposed)


class FlexMaskModTests(unittest.TestCase):
    def test_mask_mod_over_packed_words_equals_the_mask(self):
        rng = np.random.default_rng(9)
        masks = [
            Mask.from_dense(rng.random((2, 3, 150, 260)) < 0.5),
            Mask.from_dense(rng.random((1, 2, 64, 64)) < 0.5, block=(64, 64), warpgroups=1),
            Mask.from_predicate("causal", 300, 300),  # full, partial and empty tiles
            Mask.from_predicate("all", 256, 256),  # no partial tile
            Mask.from_predicate("none", 100, 100),
            Mask.from_topk(rng.integers(-1, 200, (1, 70, 1)), 200, block=(128, 64),
                           warpgroups=1, encoding="quad-lane"),
        ]
        for m in masks:
            with self.subTest(mask=repr(m)):
                B, H, Sq, Sk = m.shape
                mod = make_mask_mod(tile_tables(m))
                b, h, q, k = np.meshgrid(np.arange(B), np.arange(H), np.arange(Sq + 3),
                                         np.arange(Sk + 5), indexing="ij")
                got = mod(b, h, q, k)
                expect = np.zeros(got.shape, bool)
                expect[:, :, :Sq, :Sk] = m.to_dense()
                np.testing.assert_array_equal(got, expect)


class ErrorTests(unittest.TestCase):
    def assertRaisesMessage(self, exc, text, fn, *args, **kwargs):
        with self.assertRaises(exc) as cm:
            fn(*args, **kwargs)
        self.assertIn(text, str(cm.exception))
        return cm.exception

    def test_wrong_dtypes_are_type_errors(self):
        self.assertRaisesMessage(TypeError, "mask: dtype float32 is not bool, uint8 or int8",
                                 Mask.from_dense, np.zeros((4, 4), np.float32))
        self.assertRaisesMessage(TypeError, "indices: dtype float64 is not an integer type",
                                 Mask.from_topk, np.zeros((4, 2)), 8)
        self.assertRaisesMessage(TypeError, "doc_ids: dtype bool",
                                 Mask.from_predicate, "causal", 4, doc_ids=np.zeros(4, bool))
        self.assertRaisesMessage(TypeError, "seqlen_k must be an int",
                                 Mask.from_topk, np.zeros((4, 2), int), 8.0)
        self.assertRaisesMessage(TypeError, "must be an int, not bool",
                                 Mask.from_predicate, "causal", True)
        self.assertRaisesMessage(TypeError, "predicate must be a str",
                                 Mask.from_predicate, b"causal", 8)
        self.assertRaisesMessage(TypeError, "block must be a (block_m, block_n) tuple",
                                 Mask.from_predicate, "causal", 8, block=128)
        self.assertRaisesMessage(TypeError, "use Mask.from_dense", Mask, "x")

    def test_wrong_ranks_and_shapes_are_value_errors(self):
        self.assertRaisesMessage(ValueError, "mask: dense mask has 1 dimensions",
                                 Mask.from_dense, np.ones(8, bool))
        self.assertRaisesMessage(ValueError, "mask: dense mask has 5 dimensions",
                                 Mask.from_dense, np.ones((1, 1, 1, 2, 2), bool))
        self.assertRaisesMessage(ValueError, "mask:", Mask.from_dense, np.ones((0, 4), bool))
        self.assertRaisesMessage(ValueError, "indices: fixed-k top-k indices has 1 dimensions",
                                 Mask.from_topk, np.zeros(4, int), 8)
        self.assertRaisesMessage(ValueError, "blocks:", Mask.from_blocks,
                                 np.zeros((2, 2), int), np.zeros(3, int))
        self.assertRaisesMessage(ValueError, "sizes: variable_block_sizes has 2 dimensions",
                                 Mask.from_blocks, np.zeros((2, 2), int), np.zeros(2, int),
                                 np.ones((2, 2), int))

    def test_bad_values_are_value_errors(self):
        self.assertRaisesMessage(ValueError, "indices:", Mask.from_topk,
                                 np.array([[0, 8]]), 8)  # out of range
        self.assertRaisesMessage(ValueError, "duplicate", Mask.from_topk,
                                 np.array([[3, 3]]), 8)
        self.assertRaisesMessage(ValueError, "unsorted", Mask.from_topk,
                                 np.array([3, 1]), 8, offsets=np.array([0, 2]))
        self.assertRaisesMessage(ValueError, "offsets: shape mismatch", Mask.from_topk,
                                 np.array([1, 3]), 8, offsets=np.array([0, 1, 2]), heads=3)
        self.assertRaisesMessage(ValueError, "applies to CSR lists only", Mask.from_topk,
                                 np.array([[1]]), 8, batch=2)
        self.assertRaisesMessage(ValueError, "blocks:", Mask.from_blocks,
                                 np.array([[5]]), np.array([1]))  # block 5 of 1
        self.assertRaisesMessage(ValueError, "seqlen_q=0 must be at least 1",
                                 Mask.from_predicate, "causal", 0)
        self.assertRaisesMessage(ValueError, "seqlen_k=-3 must be at least 1",
                                 Mask.from_predicate, "causal", 4, -3)
        self.assertRaisesMessage(ValueError, "is too large: the limit is 2147483647",
                                 Mask.from_predicate, "causal", 2**31)
        self.assertRaisesMessage(ValueError, "threads=5000 is too large",
                                 Mask.from_predicate, "causal", 8, threads=5000)
        self.assertRaisesMessage(ValueError, "block=(100, 128)", Mask.from_predicate,
                                 "causal", 8, block=(100, 128))
        self.assertRaisesMessage(ValueError, "warpgroups=7", Mask.from_predicate,
                                 "causal", 8, warpgroups=7)
        self.assertRaisesMessage(ValueError, "encoding 'fragment' is not one of",
                                 Mask.from_predicate, "causal", 8, encoding="fragment")

    def test_bad_predicates_are_value_errors(self):
        self.assertRaisesMessage(ValueError, "predicate: predicate syntax: expected all, "
                                 "none, causal", Mask.from_predicate, "causal &", 8)
        self.assertRaisesMessage(ValueError, "window needs LEFT:RIGHT at column 9",
                                 Mask.from_predicate, "window=3", 8)
        self.assertRaisesMessage(ValueError, "parentheses nest deeper than the limit of 64",
                                 Mask.from_predicate, "(" * 65 + "all" + ")" * 65, 8)
        self.assertRaisesMessage(ValueError, "predicate: doc=ids: missing document ids "
                                 "(pass doc_ids=)", Mask.from_predicate, "doc=ids", 8)
        self.assertRaisesMessage(ValueError, "document ids length", Mask.from_predicate,
                                 "causal", 8, doc_ids=np.zeros(7, int))
        self.assertRaisesMessage(ValueError, "document ids length", Mask.from_predicate,
                                 "doc=x", 8, doc_ids={"x": np.zeros(9, int)})

    def test_missing_and_corrupt_files(self):
        with TempDir() as d:
            e = self.assertRaisesMessage(FileError, str(d / "nope.safetensors"),
                                         Mask.load, d / "nope.safetensors")
            self.assertIsInstance(e, ValueError)
            self.assertIsInstance(e, OSError)
            (d / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
            self.assertRaisesMessage(ValueError, str(d / "bad.safetensors"), Mask.load,
                                     d / "bad.safetensors")
            self.assertRaisesMessage(FileError, "not a regular file", Mask.load, d)
            self.assertRaisesMessage(ValueError, "bytes:", Mask.from_bytes, b"garbage")

    def test_load_reads_the_header_first_and_checks_checksums(self):
        m = Mask.from_predicate("causal", 300, 200, block=(64, 64))
        with TempDir() as d:
            good = d / "m.safetensors"
            m.save(good)
            self.assertIn("sha256.words", m.metadata())
            data = good.read_bytes()
            # A 5 GiB sparse file and a valid file extended: refused from the header.
            huge = d / "huge.safetensors"
            with open(huge, "wb") as f:
                f.truncate(5 << 30)
            self.assertRaisesMessage(ValueError, "header", Mask.load, huge)
            with open(good, "r+b") as f:
                f.truncate(5 << 30)
            self.assertRaisesMessage(ValueError, "truncated or extended", Mask.load, good)
            # A flipped bit in the words: the checksum names the tensor.
            flipped = bytearray(data)
            flipped[-1] ^= 1
            good.write_bytes(bytes(flipped))
            self.assertRaisesMessage(ValueError, "'words'", Mask.load, good)
            good.write_bytes(data)
            self.assertEqual(Mask.load(good), m)

    def test_extension_load_reads_the_header_first(self):
        """The extension's own load (not only Mask.load's Python pre-check) refuses a
        file whose length its header does not describe before reading its body, even
        with 1 GiB of address space for a 5 GiB file, and a FIFO without blocking."""
        with TempDir() as d:
            huge = d / "m.safetensors"
            Mask.from_predicate("causal", 300, 200, block=(64, 64)).save(huge)
            with open(huge, "r+b") as f:
                f.truncate(5 << 30)
            os.mkfifo(d / "fifo")
            code = ("import resource, sys\n"
                    "import fragmask._fragmask as ext\n"
                    "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
                    "for p in sys.argv[1:]:\n"
                    "    try:\n"
                    "        ext.load(p)\n"
                    "        print('loaded', p)\n"
                    "    except (ValueError, OSError) as e:\n"
                    "        print(type(e).__name__, e)\n")
            done = subprocess.run([os.sys.executable, "-c", code, str(huge), str(d / "fifo")],
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            lines = done.stdout.strip().splitlines()
            self.assertEqual(len(lines), 2, done.stdout)
            self.assertIn(str(huge), lines[0])
            self.assertIn("truncated or extended", lines[0])
            self.assertIn(str(d / "fifo"), lines[1])
            self.assertIn("not a regular file", lines[1])

    def test_saving_over_a_directory_or_into_a_missing_one_is_refused(self):
        m = Mask.from_predicate("causal", 64, 64)
        with TempDir() as d:
            (d / "dir").mkdir()
            (d / "dir" / "keep").write_text("x")
            e = self.assertRaisesMessage(FileError, "not a regular file", m.save, d / "dir")
            self.assertIsInstance(e, ValueError)
            self.assertRaisesMessage(FileError, "missing", m.save, d / "missing" / "m.st")
            self.assertEqual(sorted(os.listdir(d)), ["dir"])
            self.assertEqual(os.listdir(d / "dir"), ["keep"])
            with self.assertRaises(TypeError):
                m.save(42)


class ExtensionArgumentTests(unittest.TestCase):
    """Every function reachable by importing the extension takes buffers, never
    addresses, and every argument error names its argument."""

    def run_isolated(self, code):
        """Runs `code` in a fresh interpreter (a segfault there fails the test instead
        of killing the run) and returns its stdout."""
        done = subprocess.run([os.sys.executable, "-c", code], capture_output=True,
                              text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def test_integers_as_addresses_are_refused_with_a_typed_error(self):
        out = self.run_isolated(
            "import fragmask._fragmask as ext\n"
            "calls = [lambda: ext.pack_dense((8, 16, [4, 4]), 128, 128, 2, False, "
            "'fragment-native', 0),\n"
            "         lambda: ext.pack_dense(0xdeadbeef, 128, 128, 2, False, "
            "'fragment-native', 0),\n"
            "         lambda: ext.pack_topk((8, 16, [4, 4]), 64, None, (None, None, None), "
            "128, 128, 2, False, 'fragment-native', 0),\n"
            "         lambda: ext.pack_blocks((8, 1, [1]), (8, 1, [1]), None, 64, None, None, "
            "128, 128, 2, False, 'fragment-native', 0),\n"
            "         lambda: ext.pack_predicate('doc=a', 4, 4, [('a', (8, 4, [4]))], None, "
            "128, 128, 2, False, 'fragment-native', 0)]\n"
            "for call in calls:\n"
            "    try:\n"
            "        call()\n"
            "    except TypeError as e:\n"
            "        print('TypeError', e)\n")
        lines = out.strip().splitlines()
        self.assertEqual(len(lines), 5, out)
        for line, arg in zip(lines, ("mask", "mask", "indices", "index", "doc_ids")):
            self.assertTrue(line.startswith("TypeError"), line)
            self.assertIn(arg, line)

    def test_device_functions_are_not_attributes_of_the_extension(self):
        ext = fragmask._fragmask
        for name in ("attention_launch", "attention_backward_launch", "decode_launch",
                     "lightning_decode", "gpu_pack_plan", "gpu_transpose_plan",
                     "attention_plan", "lightning_plan", "decode_plan_handle"):
            self.assertFalse(hasattr(ext, name), name)
        with self.assertRaisesRegex(RuntimeError, "claimed"):
            ext.claim_device_api()
        # A fresh interpreter importing the extension directly: the package claimed it.
        out = self.run_isolated(
            "import fragmask._fragmask as ext\n"
            "try:\n"
            "    ext.claim_device_api()\n"
            "except RuntimeError:\n"
            "    print('refused')\n")
        self.assertEqual(out.strip(), "refused")

    def test_buffers_are_read_as_arrays(self):
        dense = np.tril(np.ones((256, 256), dtype=np.uint8))
        ext = fragmask._fragmask
        packed = ext.pack_dense(dense, 128, 128, 2, False, "fragment-native", 0)
        self.assertEqual(Mask(packed), Mask.from_dense(dense))
        with self.assertRaisesRegex(TypeError, "mask"):
            ext.pack_dense(dense.astype(np.int64), 128, 128, 2, False, "fragment-native", 0)
        with self.assertRaisesRegex(ValueError, "mask.*contiguous"):
            ext.pack_dense(dense[:, ::2], 128, 128, 2, False, "fragment-native", 0)

    def test_integer_errors_of_the_extension_name_their_argument(self):
        ext = fragmask._fragmask
        dense = np.ones((128, 128), dtype=np.uint8)
        index = np.zeros((4, 1), dtype=np.int64)
        tile = (128, 128, 2, False, "fragment-native", 0)
        cases = [
            (lambda: ext.pack_dense(dense, -1, *tile[1:]), ValueError, "block_m"),
            (lambda: ext.pack_dense(dense, 128, 2**40, *tile[2:]), ValueError, "block_n"),
            (lambda: ext.pack_dense(dense, 128, 128, "2", *tile[3:]), TypeError, "warpgroups"),
            (lambda: ext.pack_topk(index, -5, None, (None, None, None), *tile), ValueError,
             "seqlen_k"),
            (lambda: ext.pack_topk(index[:, 0], 64, np.arange(5), (None, -2, None), *tile),
             ValueError, "heads"),
            (lambda: ext.pack_blocks(index, index[:, 0], None, 0, None, None, *tile),
             ValueError, "block_size"),
            (lambda: ext.pack_blocks(index, index[:, 0], None, 64, 2.5, None, *tile),
             TypeError, "seqlen_q"),
            (lambda: ext.pack_predicate("causal", 0, 4, [], None, *tile), ValueError,
             "seqlen_q"),
            (lambda: Mask.from_dense(dense)._packed.with_transposed(-1, True, 0), ValueError,
             "warpgroups"),
        ]
        for call, error, name in cases:
            with self.assertRaisesRegex(error, name):
                call()

    def test_threads_errors_name_threads(self):
        dense = np.ones((128, 128), dtype=bool)
        ext = fragmask._fragmask
        m = Mask.from_dense(dense)
        for bad, error in ((-1, ValueError), (2**64, ValueError), ("4", TypeError),
                           (4.0, TypeError), (True, TypeError)):
            with self.assertRaisesRegex(error, "threads"):
                Mask.from_dense(dense, threads=bad)
            with self.assertRaisesRegex(error, "threads"):
                m.with_transposed(threads=bad)
            with self.assertRaisesRegex(error, "threads"):
                ext.pack_dense(dense.view(np.uint8), 128, 128, 2, False, "fragment-native",
                               bad)
            with self.assertRaisesRegex(error, "threads"):
                m._packed.with_transposed(None, True, bad)
        self.assertEqual(Mask.from_dense(dense, threads=2), m)


class DeterministicOptionTests(unittest.TestCase):
    """``deterministic=``: its default follows torch's flag, and it reaches the
    extension's backward plan (numpy only: a stand-in for torch's flag, and the bindings'
    signatures; tests/test_torch.py follows it through the autograd paths with torch)."""

    class FakeTorch:
        """torch's flag alone (``_deterministic`` reads nothing else)."""

        def __init__(self, enabled):
            self.enabled = enabled

        def are_deterministic_algorithms_enabled(self):
            return self.enabled

    def test_the_default_follows_torchs_flag_and_true_or_false_override_it(self):
        from fragmask._ops import _deterministic
        for enabled in (False, True):
            torch = self.FakeTorch(enabled)
            self.assertIs(_deterministic(torch, "t", None), enabled)
            self.assertIs(_deterministic(torch, "t", True), True)
            self.assertIs(_deterministic(torch, "t", False), False)
            for bad in (1, 0, "true", 1.0):
                with self.assertRaisesRegex(TypeError, "deterministic"):
                    _deterministic(torch, "t", bad)

    def test_attention_takes_deterministic_as_a_keyword_defaulting_to_torchs_flag(self):
        import inspect

        import fragmask.distributed as fd
        for fn in (fragmask.attention, fd.attention):
            p = inspect.signature(fn).parameters["deterministic"]
            self.assertEqual(p.kind, inspect.Parameter.KEYWORD_ONLY, fn)
            self.assertIsNone(p.default, fn)

    def test_the_backward_bindings_take_deterministic_defaulting_to_false(self):
        import inspect

        from fragmask._device import API
        for name in ("attention_backward_plan", "attention_backward_launch"):
            p = inspect.signature(API[name]).parameters
            self.assertIn("deterministic", p, name)
            self.assertIs(p["deterministic"].default, False, name)
            # Last: the wrappers pass it after the gradients' strides.
            self.assertEqual(list(p)[-1], "deterministic", name)


class DecodePlanTests(unittest.TestCase):
    """fragmask.decode's shape checks run in Rust before any GPU is looked for (the op
    asks _fragmask.decode_plan for the split count, workspace and lse shape)."""

    def plan(self, q=(2, 1, 8, 64), k=(2, 300, 2, 64), v=None, dtypes=None, table=None,
             lens=None, cu=None, max_q=0, window=(-1, -1), scale=0.0, splits=0):
        dtypes = dtypes or ("bfloat16",) * 3
        return fragmask._fragmask.decode_plan(list(q), list(k), list(v or k), dtypes, table,
                                              lens, cu, max_q, window[0], window[1], scale,
                                              splits, 132)

    def test_plans_split_the_keys_and_size_the_workspace(self):
        splits, ws_o, ws_lse, lse = self.plan(k=(2, 65536, 2, 64))
        self.assertGreater(splits, 1)
        self.assertEqual(lse, [2, 8, 1])
        self.assertEqual(ws_o, ws_lse * 64)
        self.assertEqual(self.plan(splits=1)[:3], (1, 0, 0))
        # Paged and varlen: lse [H, total_q].
        self.assertEqual(self.plan(q=(10, 8, 64), k=(40, 16, 2, 64), table=[2, 20], cu=[3],
                                   max_q=6)[3], [8, 10])

    def test_masked_plans_balance_listed_blocks_and_take_per_head_gqa(self):
        # Write-up 002's decode: 64 tokens, 12 heads, 64-key blocks, 10% kept per head.
        rng = np.random.default_rng(3)
        nb = 23296 // 64
        index = np.stack([np.sort(rng.choice(nb, 36, replace=False)) for _ in range(12)])
        mask = fragmask.Mask.from_blocks(index[:, None, :].astype(np.int32),
                                         np.full((12, 1), 36, np.int32), block_size=64,
                                         seqlen_q=64, seqlen_k=23296, block=(64, 64))
        mid = mask._meta[8]
        fragmask._fragmask.decode_mask_prepare(mid, mask.to_bytes())
        q, k = [1, 64, 12, 128], [1, 23296, 12, 128]
        plan = lambda splits=0: fragmask._fragmask.decode_plan(  # noqa: E731
            q, k, k, ("bfloat16",) * 3, None, None, None, 0, -1, -1, 0.0, splits, 132, mid)
        splits, ws_o, ws_lse, lse = plan()
        # Listed blocks, not the 364 of the capacity, size the splits: 2 or 3 per split.
        self.assertTrue(12 <= splits <= 18, splits)
        # 2 to 16 splits of 64-row CTAs merge inside a thread-block cluster: no workspace.
        self.assertEqual(ws_lse, 0 if splits <= 16 else splits * 12 * 64)
        self.assertEqual(ws_o, ws_lse * 128)
        self.assertEqual(plan(splits=20)[2], 20 * 12 * 64)  # past a cluster: partials
        self.assertEqual(lse, [1, 12, 64])
        # The same mask for 24 query heads over 12 KV heads is refused (12 heads stored).
        with self.assertRaisesRegex(ValueError, "heads"):
            fragmask._fragmask.decode_plan([1, 64, 24, 128], k, k, ("bfloat16",) * 3, None,
                                           None, None, 0, -1, -1, 0.0, 0, 132, mid)
        # Per-head lists with GQA (12 query heads over 4 KV heads): each query head its
        # own CTAs, so the workspace counts 12 heads.
        g = fragmask._fragmask.decode_plan(q, [1, 23296, 4, 128], [1, 23296, 4, 128],
                                           ("bfloat16",) * 3, None, None, None, 0, -1, -1,
                                           0.0, 0, 132, mid)
        self.assertEqual(g[2], 0 if 2 <= g[0] <= 16 else g[0] * 12 * 64)
        # At D = 256 too (refused before this change).
        d256 = [1, 23296, 12, 256]
        self.assertGreaterEqual(fragmask._fragmask.decode_plan(
            [1, 64, 12, 256], d256, d256, ("bfloat16",) * 3, None, None, None, 0, -1, -1,
            0.0, 0, 132, mid)[0], 1)
        fragmask._fragmask.decode_mask_release(mid)
        with self.assertRaisesRegex(ValueError, "not prepared"):
            plan()

    def test_attention_decode_shapes_plan_the_decode_commands_splits(self):
        # fragmask.attention sends a one-row call to the decode kernel in the form
        # _ops._decode_form gives it (head-major caches for [B, H, S, D], the CLI's
        # attention entry point's); it is planned as `fragmask decode` plans the same
        # call on [B, Sk, Hkv, D] caches: B=16, H=32, Hkv=8, Sk=8192 gets 2 splits on 132
        # SMs (unsplit on one CTA slot per SM, so planned on two), a single request of
        # 65536 keys 16, the same either way.
        from fragmask import _ops

        for B, Sk in ((16, 8192), (1, 65536)):
            decode = self.plan(q=(B, 1, 32, 128), k=(B, Sk, 8, 128))
            for bshd in (False, True):
                q, k = ((B, 1, 32, 128), (B, Sk, 8, 128)) if bshd else \
                    ((B, 32, 1, 128), (B, 8, Sk, 128))
                qs, ks, lse, head_major = _ops._decode_form(q, k, k, bshd)
                self.assertEqual(head_major, not bshd)
                got = fragmask._fragmask.decode_plan(
                    list(qs), list(ks), list(ks), ("bfloat16",) * 3, None, None, None, 0, -1,
                    -1, 0.0, 0, 132, 0, head_major)
                self.assertEqual(got[0], decode[0], (B, Sk, bshd))
                self.assertEqual(list(lse), got[3])
            self.assertEqual(decode[0], 2 if B == 16 else 16)

    def test_bad_shapes_are_typed_errors(self):
        bad = [
            (dict(q=(2, 1, 6, 64), k=(2, 300, 4, 64)), "multiple"),
            (dict(q=(2, 1, 8, 96), k=(2, 300, 2, 96)), "D = 96"),
            (dict(k=(40, 24, 2, 64), table=[2, 20]), "page size 24"),
            (dict(k=(3, 300, 2, 64)), "requests"),
            (dict(v=(2, 299, 2, 64)), "must match"),
            (dict(dtypes=("float32",) * 3), "float32"),
            (dict(dtypes=("bfloat16", "float16", "float16")), "q is bfloat16"),
            (dict(q=(10, 8, 64), cu=[3]), "max_seqlen_q"),
            (dict(lens=[3]), "seqlens_k"),
            (dict(window=(-2, 0)), "window left"),
            (dict(splits=999), "splits"),
        ]
        for kwargs, needle in bad:
            with self.assertRaises((ValueError, TypeError), msg=str(kwargs)) as e:
                self.plan(**kwargs)
            self.assertIn(needle, str(e.exception), str(kwargs))


if __name__ == "__main__":
    unittest.main()
