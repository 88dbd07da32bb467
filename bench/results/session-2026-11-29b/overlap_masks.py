"""Write-up 002 block lists (N=23296, H=12, 64-token blocks) whose neighbouring query blocks
share a set fraction of their lists, packed for the CLI (`--mask`): the shared-K/V tile's
gain depends on what two paired query blocks share, and the suite's rows are uniform random
lists (they share about the kept fraction). Usage: python overlap_masks.py OUTDIR"""
import sys
from pathlib import Path

import numpy as np
import fragmask

N, H = 23296, 12
QB = KB = N // 64


def lists(frac, overlap, seed):
    """Query blocks 2i and 2i+1: the first keeps k random key blocks; the second keeps
    round(overlap * k) of them and the rest from the other key blocks."""
    rng = np.random.default_rng(seed)
    k = max(1, round(frac * KB))
    index = np.empty((H, QB, k), dtype=np.int32)
    for h in range(H):
        for q in range(0, QB, 2):
            base = rng.choice(KB, k, replace=False)
            index[h, q] = np.sort(base)
            if q + 1 < QB:
                keep = rng.choice(base, round(overlap * k), replace=False)
                rest = rng.choice(np.setdiff1d(np.arange(KB), base), k - len(keep), replace=False)
                index[h, q + 1] = np.sort(np.concatenate([keep, rest]))
    return index, np.full((H, QB), k, dtype=np.int32)


out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for frac in (0.1, 0.5):
    for overlap in (0.5, 0.8, 1.0):
        index, num = lists(frac, overlap, 7)
        m = fragmask.Mask.from_blocks(index, num, block_size=64, seqlen_q=N, seqlen_k=N,
                                      block=(64, 64), warpgroups=1)
        m.save(out / f"wu002-f{int(frac * 100)}-o{int(overlap * 100)}.safetensors")
