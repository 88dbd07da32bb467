//! Block lists of video block-sparse attention: `q2k_block_sparse_index`,
//! `q2k_block_sparse_num`, `variable_block_sizes` (shared/reference 002).

use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

use super::{IndexValue, MaskSource};
use crate::shape::broadcast_index;
use crate::{bits, MaskError, MaskShape};

/// Options of [`BlockSparseMask::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSparseOptions {
    /// Tokens per query block and per key block (64 in the reference kernel).
    pub block_size: usize,
    /// Sq; default `q_blocks × block_size`. Must satisfy
    /// `ceil(seqlen_q / block_size) == q_blocks`.
    pub seqlen_q: Option<usize>,
    /// Sk; default `kv_blocks × block_size`. Must satisfy
    /// `ceil(seqlen_k / block_size) == kv_blocks`.
    pub seqlen_k: Option<usize>,
}

impl Default for BlockSparseOptions {
    fn default() -> Self {
        BlockSparseOptions {
            block_size: 64,
            seqlen_q: None,
            seqlen_k: None,
        }
    }
}

/// Block-sparse attention with variable block sizes.
///
/// Query block `qb` (tokens `[qb·bs, (qb+1)·bs)`) attends to the key blocks
/// `q2k_block_sparse_index[b, h, qb, 0..q2k_block_sparse_num[b, h, qb]]`; key block
/// `kb` holds `variable_block_sizes[kb]` valid tokens, the first ones of its `bs`
/// slots. So `mask(b, h, q, k) = k / bs ∈ list(b, h, q / bs) && k % bs <
/// variable_block_sizes[k / bs]`.
///
/// - `q2k_block_sparse_index`: `[Qb, maxK]`, `[H, Qb, maxK]` or `[B, H, Qb, maxK]`;
///   entries past the row's count are ignored (any value). The listed blocks may be in
///   any order but must be **unique** (a repeat would make the reference kernel attend
///   to a block twice) and in `0..kv_blocks`.
/// - `q2k_block_sparse_num`: the index's shape without its last dimension; each count
///   in `0..=maxK`.
/// - `variable_block_sizes`: `[kv_blocks]`, each in `0..=bs`; absent means every block
///   is whole (then `kv_blocks` comes from `seqlen_k`).
///
/// ```
/// use fragmask_masks::{BlockSparseMask, BlockSparseOptions, MaskSource};
/// // 2 query blocks, up to 2 key blocks each, 3 key blocks of 64 (the last has 10 tokens).
/// let index = [0i32, 2, 1, 0];
/// let num = [2i32, 1];
/// let sizes = [64i32, 64, 10];
/// let m = BlockSparseMask::new(&[2, 2], &index, &[2], &num, Some(&sizes[..]),
///     BlockSparseOptions::default()).unwrap();
/// assert!(m.get(0, 0, 5, 128 + 9) && !m.get(0, 0, 5, 128 + 10) && !m.get(0, 0, 70, 0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSparseMask {
    shape: MaskShape,
    block_size: usize,
    q_blocks: usize,
    max_kv: usize,
    index: Vec<u32>,
    num: Vec<u32>,
    sizes: Vec<u32>,
}

impl BlockSparseMask {
    /// Validates and copies the three block lists (see the type's docs).
    pub fn new<I: IndexValue, N: IndexValue, V: IndexValue>(
        index_dims: &[usize],
        index: &[I],
        num_dims: &[usize],
        num: &[N],
        sizes: Option<&[V]>,
        options: BlockSparseOptions,
    ) -> Result<BlockSparseMask, MaskError> {
        let bs = options.block_size;
        if bs == 0 {
            return Err(MaskError::EmptyDimension { what: "block_size" });
        }
        let (batch, heads, q_blocks, max_kv) = match *index_dims {
            [q, k] => (1, 1, q, k),
            [h, q, k] => (1, h, q, k),
            [b, h, q, k] => (b, h, q, k),
            _ => {
                return Err(MaskError::BadRank {
                    what: "q2k_block_sparse_index",
                    rank: index_dims.len(),
                    expected: "2 ([Qb, maxK]), 3 ([H, Qb, maxK]) or 4 ([B, H, Qb, maxK])",
                })
            }
        };
        if num_dims != &index_dims[..index_dims.len() - 1] {
            return Err(if num_dims.len() + 1 != index_dims.len() {
                MaskError::BadRank {
                    what: "q2k_block_sparse_num",
                    rank: num_dims.len(),
                    expected: "one less than q2k_block_sparse_index",
                }
            } else {
                let i = (0..num_dims.len())
                    .find(|&i| num_dims[i] != index_dims[i])
                    .unwrap_or(0);
                MaskError::ShapeMismatch {
                    what: "q2k_block_sparse_num dimension (must match q2k_block_sparse_index)",
                    expected: index_dims[i] as u64,
                    found: num_dims[i] as u64,
                }
            });
        }
        let Some((lists, entries)) = batch
            .checked_mul(heads)
            .and_then(|l| l.checked_mul(q_blocks))
            .and_then(|l| Some((l, l.checked_mul(max_kv)?)))
        else {
            return Err(MaskError::Overflow {
                what: "q2k_block_sparse_index elements",
                detail: alloc::format!("shape {index_dims:?}"),
            });
        };
        if index.len() != entries {
            return Err(MaskError::ShapeMismatch {
                what: "q2k_block_sparse_index elements",
                expected: entries as u64,
                found: index.len() as u64,
            });
        }
        if num.len() != lists {
            return Err(MaskError::ShapeMismatch {
                what: "q2k_block_sparse_num elements",
                expected: lists as u64,
                found: num.len() as u64,
            });
        }
        let kv_blocks = match (sizes, options.seqlen_k) {
            (Some(s), _) => s.len(),
            (None, Some(sk)) => sk.div_ceil(bs),
            (None, None) => {
                return Err(MaskError::Missing {
                    what: "input",
                    name: "variable_block_sizes or seqlen_k".into(),
                })
            }
        };
        let seqlen_q = checked_seqlen(options.seqlen_q, q_blocks, bs, "seqlen_q", "query blocks")?;
        let seqlen_k = checked_seqlen(options.seqlen_k, kv_blocks, bs, "seqlen_k", "key blocks")?;
        // Checked before the per-key-block tables below are allocated.
        for (what, value) in [("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k)] {
            if value as u64 > crate::MAX_SEQLEN {
                return Err(MaskError::TooLarge {
                    what,
                    value: value as u64,
                    limit: crate::MAX_SEQLEN,
                });
            }
        }
        let shape = MaskShape::new(batch, heads, seqlen_q, seqlen_k)?;
        let mut size_list = Vec::with_capacity(kv_blocks);
        match sizes {
            Some(s) => {
                for (kb, v) in s.iter().enumerate() {
                    let v = v.to_i64();
                    if v < 0 || v > bs as i64 {
                        return Err(MaskError::IndexOutOfRange {
                            what: "variable_block_sizes (valid tokens per key block)",
                            row: kb as u64,
                            index: v,
                            bound: bs as u64 + 1,
                        });
                    }
                    size_list.push(v as u32);
                }
            }
            None => size_list.resize(kv_blocks, bs as u32),
        }
        let mut num_list = Vec::with_capacity(lists);
        let mut index_list = vec![0u32; lists * max_kv];
        let mut seen = vec![usize::MAX; kv_blocks];
        for list in 0..lists {
            let count = num[list].to_i64();
            if count < 0 || count > max_kv as i64 {
                return Err(MaskError::IndexOutOfRange {
                    what: "q2k_block_sparse_num (blocks per query block)",
                    row: list as u64,
                    index: count,
                    bound: max_kv as u64 + 1,
                });
            }
            num_list.push(count as u32);
            for j in 0..count as usize {
                let kb = index[list * max_kv + j].to_i64();
                if kb < 0 || kb >= kv_blocks as i64 {
                    return Err(MaskError::IndexOutOfRange {
                        what: "q2k_block_sparse_index (key block)",
                        row: list as u64,
                        index: kb,
                        bound: kv_blocks as u64,
                    });
                }
                if seen[kb as usize] == list {
                    return Err(MaskError::DuplicateIndex {
                        what: "q2k_block_sparse_index",
                        row: list as u64,
                        index: kb,
                    });
                }
                seen[kb as usize] = list;
                index_list[list * max_kv + j] = kb as u32;
            }
        }
        Ok(BlockSparseMask {
            shape,
            block_size: bs,
            q_blocks,
            max_kv,
            index: index_list,
            num: num_list,
            sizes: size_list,
        })
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    fn list(&self, batch: usize, head: usize, q_block: usize) -> &[u32] {
        let b = broadcast_index(batch, self.shape.batch);
        let h = broadcast_index(head, self.shape.heads);
        let list = (b * self.shape.heads + h) * self.q_blocks + q_block;
        &self.index[list * self.max_kv..][..self.num[list] as usize]
    }

    /// Valid key tokens of key block `kb`, clipped to the mask.
    fn tokens(&self, kb: u32) -> Range<usize> {
        let start = kb as usize * self.block_size;
        let end = (start + self.sizes[kb as usize] as usize).min(self.shape.seqlen_k);
        start..end.max(start)
    }
}

fn checked_seqlen(
    given: Option<usize>,
    blocks: usize,
    bs: usize,
    what: &'static str,
    blocks_what: &'static str,
) -> Result<usize, MaskError> {
    let full = blocks.checked_mul(bs).ok_or(MaskError::TooLarge {
        what: blocks_what,
        value: blocks as u64,
        limit: (usize::MAX / bs) as u64,
    })?;
    match given {
        None => Ok(full),
        Some(s) if s.div_ceil(bs) == blocks => Ok(s),
        Some(s) => Err(MaskError::ExtentOutOfRange {
            what,
            found: s as u64,
            min: (full.saturating_sub(bs) + 1) as u64,
            max: full as u64,
        }),
    }
}

impl MaskSource for BlockSparseMask {
    fn shape(&self) -> MaskShape {
        self.shape
    }

    fn row_bits(
        &self,
        batch: usize,
        head: usize,
        q: usize,
        k0: usize,
        cols: usize,
        out: &mut [u64],
    ) {
        let k1 = k0 + cols;
        for &kb in self.list(batch, head, q / self.block_size) {
            let t = self.tokens(kb);
            let (lo, hi) = (t.start.max(k0), t.end.min(k1));
            if lo < hi {
                bits::set_range(out, lo - k0, hi - k0);
            }
        }
    }

    fn strip_counts(
        &self,
        batch: usize,
        head: usize,
        rows: Range<usize>,
        block_n: usize,
        counts: &mut [u64],
    ) -> bool {
        let bs = self.block_size;
        let first = rows.start / bs;
        let last = (rows.end - 1) / bs;
        for q_block in first..=last {
            let q_lo = (q_block * bs).max(rows.start);
            let q_hi = ((q_block + 1) * bs).min(rows.end);
            let nrows = (q_hi - q_lo) as u64;
            for &kb in self.list(batch, head, q_block) {
                let t = self.tokens(kb);
                let mut k = t.start;
                while k < t.end {
                    let n = k / block_n;
                    let end = ((n + 1) * block_n).min(t.end);
                    counts[n] += nrows * (end - k) as u64;
                    k = end;
                }
            }
        }
        true
    }
}
