"""The run-time density check against the host's choice, A/B in one process (thirty-ninth
session): session-2026-11-29f/dense_py_ab.py's measurement over more rows.

The same mask packed on the GPU twice: A is left on the device (its plans run the kernels
that check the packer's partial-tile count when they run: ListEntries::DenseAtRunTime where
the host takes it), B is read back with ``.to("cpu")`` (its plans see the host lists: the
dense-list kernels where every tile is partial, the list-reading ones otherwise). B/A above 1
means the run-time check is faster. Outputs compared byte for byte (the non-deterministic
backward's gradients are not bit-reproducible), then A and B timed interleaved (ABBA).

    python3 runtime_ab.py ROUNDS [ROW_REGEX]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "session-2026-11-29f"))
import dense_py_ab  # noqa: E402

S = dense_py_ab.S
ROWS = [  # name, head dim, mask, backward, deterministic
    ("fwd.s16384.random50", 128, "random", False, False),
    ("fwd.s16384.topk8", 128, "topk", False, False),
    ("fwd.d64.s16384.random50", 64, "random", False, False),
    ("fwd.d256.s16384.random50", 256, "random", False, False),
    ("fwd.s16384.blocksparse10", 128, "blocksparse", False, False),
    ("fwd.d256.s16384.blocksparse10", 256, "blocksparse", False, False),
    ("bwd.s16384.random50", 128, "random", True, False),
    ("bwd.s16384.topk8", 128, "topk", True, False),
    ("bwd.s16384.blocksparse10", 128, "blocksparse", True, False),
    ("bwd.s16384.random50.det", 128, "random", True, True),
    ("bwd.s16384.blocksparse10.det", 128, "blocksparse", True, True),
]


def dense_mask(kind, gen):
    """dense_py_ab's masks, and the suite's block-sparse one: 10% of 128x128 tiles, half
    the tokens inside."""
    if kind != "blocksparse":
        return dense_py_ab_mask(kind, gen)
    n = S // 128
    keep = torch.rand(n, n, device="cuda", generator=gen) < 0.1
    inside = torch.rand(S, S, device="cuda", generator=gen) < 0.5
    return keep.repeat_interleave(128, 0).repeat_interleave(128, 1) & inside


dense_py_ab_mask = dense_py_ab.dense_mask
dense_py_ab.ROWS = ROWS
dense_py_ab.dense_mask = dense_mask

if __name__ == "__main__":
    dense_py_ab.main()
