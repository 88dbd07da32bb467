"""``Mask.to_flex_block_mask``: the packed lists as FlexAttention's BlockMask.

FlexAttention skips tiles in neither list, calls no ``mask_mod`` on full tiles, and
calls it on partial tiles. The default ``mask_mod`` here reads the packed bits: for
element (q, k) of batch b, head h, the tile state ``state[b, h, q // bm, k // bn]`` is
-2 (empty), -1 (full) or the partial tile's index into ``words``; a partial tile's bit
is bit ``p % 32`` of word ``p // 32`` of its words, ``p = positions[q % bm, k % bn]``
(docs/masks.md, "The file"). The same function runs on numpy arrays (the CPU tests
check it against ``to_dense``) and on torch tensors (inside FlexAttention's vmap).
"""

EMPTY, FULL = -2, -1


def tile_tables(mask):
    """numpy tables of the mask_mod: state [B, H, Mb, Nb] int32, words [P', W] int32
    (P' = max(P, 1): a zero tile when there are no partial tiles), positions [bm, bn]
    int32, and the sizes."""
    import numpy as np

    B, H, Sq, Sk = mask.shape
    bm, bn = mask.block
    num, idx, full_num, full_idx, off = mask.lists
    Mb, Nb = idx.shape[2], idx.shape[3]
    state = np.full((B, H, Mb, Nb), EMPTY, dtype=np.int32)
    j = np.arange(Nb)
    b, h, m, jj = np.nonzero(j < full_num[..., None])
    state[b, h, m, full_idx[b, h, m, jj]] = FULL
    b, h, m, jj = np.nonzero(j < num[..., None])
    state[b, h, m, idx[b, h, m, jj]] = off[b, h, m, jj]
    words = mask.words
    words = words.reshape(words.shape[0], int(np.prod(words.shape[1:]))).view(np.int32)
    if words.shape[0] == 0:
        words = np.zeros((1, max(words.shape[1], 1)), dtype=np.int32)
    positions = mask.bit_positions.astype(np.int32)
    return {"state": state, "words": words, "positions": positions,
            "B": B, "H": H, "Sq": Sq, "Sk": Sk, "bm": bm, "bn": bn, "Mb": Mb, "Nb": Nb}


def make_mask_mod(t):
    """mask_mod(b, h, q, k) over the tables ``t`` (numpy arrays or torch tensors)."""
    state, words, positions = t["state"], t["words"], t["positions"]
    B, H, Sq, Sk = t["B"], t["H"], t["Sq"], t["Sk"]
    bm, bn, rows, cols = t["bm"], t["bn"], t["Mb"] * t["bm"], t["Nb"] * t["bn"]

    def mask_mod(b, h, q, k):
        # Indices stay in range for any q, k (FlexAttention may pad to its block);
        # elements outside Sq x Sk are False.
        qi, ki = q % rows, k % cols
        s = state[b if B > 1 else 0, h if H > 1 else 0, qi // bm, ki // bn]
        p = positions[qi % bm, ki % bn]
        word = words[s * (s >= 0), p // 32]
        bit = (word >> (p % 32)) & 1
        return ((s == FULL) | ((s >= 0) & (bit == 1))) & (q < Sq) & (k < Sk)

    return mask_mod


def to_flex_block_mask(mask, device=None, mask_mod=None):
    import torch
    from torch.nn.attention.flex_attention import BlockMask

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)

    def tensor(a):
        return torch.from_numpy(a.copy()).to(device)

    if mask_mod is None:
        t = tile_tables(mask)
        for key in ("state", "words", "positions"):
            t[key] = tensor(t[key])
        mask_mod = make_mask_mod(t)
    B, H, Sq, Sk = mask.shape
    lists = mask.lists
    return BlockMask.from_kv_blocks(
        tensor(lists.num_blocks),
        tensor(lists.indices),
        tensor(lists.full_num_blocks),
        tensor(lists.full_indices),
        BLOCK_SIZE=tuple(mask.block),
        mask_mod=mask_mod,
        seq_lengths=(Sq, Sk),
    )
