//! Per-query key index lists (top-k selection), CSR or fixed-k.

use alloc::vec::Vec;
use core::ops::Range;

use super::{IndexValue, MaskSource};
use crate::shape::broadcast_index;
use crate::{MaskError, MaskShape};

/// Per-query key lists: `mask(b, h, q, k) = k ∈ keys(b, h, q)`.
///
/// Stored as CSR over rows in `(batch, head, q)` order, each row sorted strictly
/// ascending. Two ways in:
///
/// - [`TopKMask::from_csr`]: offsets + indices. Each row must already be **sorted
///   strictly ascending** (so unique); an unsorted or repeated index is a typed error.
///   No padding.
/// - [`TopKMask::from_fixed_k`]: `k` indices per row (`torch.topk(...).indices`).
///   Rows may be in **any order**; `-1` marks **padding** (rows with fewer than `k`
///   keys) and is skipped; any other negative or `>= seqlen_k` index is out of range;
///   a key repeated in a row is a typed error (top-k never repeats one, so a repeat
///   means an indexing bug upstream).
///
/// Memory is proportional to the number of indices.
///
/// ```
/// use fragmask_masks::{MaskShape, MaskSource, TopKMask};
/// let shape = MaskShape::new(1, 1, 2, 300).unwrap();
/// // Row 0 keeps keys 7 and 299; row 1 keeps key 3 (one slot of padding).
/// let topk = TopKMask::from_fixed_k(shape, 2, &[299i64, 7, -1, 3]).unwrap();
/// assert!(topk.get(0, 0, 0, 299) && topk.get(0, 0, 1, 3) && !topk.get(0, 0, 1, 7));
/// assert_eq!(topk.nnz(), 3);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopKMask {
    shape: MaskShape,
    offsets: Vec<u64>,
    indices: Vec<u32>,
}

impl TopKMask {
    /// From CSR: `offsets` has `batch × heads × seqlen_q + 1` entries, from 0,
    /// non-decreasing, to `indices.len()`; row `r`'s keys are
    /// `indices[offsets[r]..offsets[r+1]]`, sorted strictly ascending, in
    /// `0..seqlen_k`.
    pub fn from_csr<O: IndexValue, I: IndexValue>(
        shape: MaskShape,
        offsets: &[O],
        indices: &[I],
    ) -> Result<TopKMask, MaskError> {
        check_seqlen_k(shape)?;
        let rows = rows_of(shape)?;
        if offsets.len() != rows + 1 {
            return Err(MaskError::ShapeMismatch {
                what: "CSR offsets length (batch*heads*seqlen_q + 1)",
                expected: rows as u64 + 1,
                found: offsets.len() as u64,
            });
        }
        let mut out_offsets = Vec::with_capacity(rows + 1);
        let mut previous = 0i64;
        for (position, o) in offsets.iter().enumerate() {
            let value = o.to_i64();
            let first_bad = position == 0 && value != 0;
            if first_bad || value < previous || value > indices.len() as i64 {
                return Err(MaskError::BadOffsets {
                    what: "CSR offsets",
                    position: position as u64,
                    value,
                });
            }
            previous = value;
            out_offsets.push(value as u64);
        }
        if previous != indices.len() as i64 {
            return Err(MaskError::BadOffsets {
                what: "CSR offsets (last must equal the number of indices)",
                position: rows as u64,
                value: previous,
            });
        }
        let mut out_indices = Vec::with_capacity(indices.len());
        for row in 0..rows {
            let span = out_offsets[row] as usize..out_offsets[row + 1] as usize;
            let mut last: Option<i64> = None;
            for index in &indices[span] {
                let index = index.to_i64();
                check_index(shape, row, index)?;
                if let Some(previous) = last {
                    if index == previous {
                        return Err(MaskError::DuplicateIndex {
                            what: "CSR top-k indices",
                            row: row as u64,
                            index,
                        });
                    }
                    if index < previous {
                        return Err(MaskError::Unsorted {
                            what: "CSR top-k indices",
                            row: row as u64,
                            previous,
                            index,
                        });
                    }
                }
                last = Some(index);
                out_indices.push(index as u32);
            }
        }
        Ok(TopKMask {
            shape,
            offsets: out_offsets,
            indices: out_indices,
        })
    }

    /// From fixed-k lists: `indices` holds `batch × heads × seqlen_q × k` entries,
    /// `k` per row in any order, `-1` = padding (see the type's docs).
    pub fn from_fixed_k<I: IndexValue>(
        shape: MaskShape,
        k: usize,
        indices: &[I],
    ) -> Result<TopKMask, MaskError> {
        check_seqlen_k(shape)?;
        let rows = rows_of(shape)?;
        let expected = rows.checked_mul(k).ok_or(MaskError::TooLarge {
            what: "top-k k (entries per row; rows * k overflows)",
            value: k as u64,
            limit: (usize::MAX / rows.max(1)) as u64,
        })?;
        if indices.len() != expected {
            return Err(MaskError::ShapeMismatch {
                what: "fixed-k top-k entries (rows * k)",
                expected: expected as u64,
                found: indices.len() as u64,
            });
        }
        let mut offsets = Vec::with_capacity(rows + 1);
        let mut out = Vec::with_capacity(indices.len());
        offsets.push(0u64);
        for row in 0..rows {
            let start = out.len();
            for index in &indices[row * k..(row + 1) * k] {
                let index = index.to_i64();
                if index == -1 {
                    continue;
                }
                check_index(shape, row, index)?;
                out.push(index as u32);
            }
            let keys = &mut out[start..];
            keys.sort_unstable();
            if let Some(pair) = keys.windows(2).find(|pair| pair[0] == pair[1]) {
                return Err(MaskError::DuplicateIndex {
                    what: "fixed-k top-k indices",
                    row: row as u64,
                    index: pair[0] as i64,
                });
            }
            offsets.push(out.len() as u64);
        }
        Ok(TopKMask {
            shape,
            offsets,
            indices: out,
        })
    }

    /// [`Self::from_fixed_k`] with the array's dimensions: `[Sq, k]`, `[H, Sq, k]` or
    /// `[B, H, Sq, k]`.
    pub fn from_fixed_k_dims<I: IndexValue>(
        dims: &[usize],
        seqlen_k: usize,
        indices: &[I],
    ) -> Result<TopKMask, MaskError> {
        let (batch, heads, seqlen_q, k) = match *dims {
            [q, k] => (1, 1, q, k),
            [h, q, k] => (1, h, q, k),
            [b, h, q, k] => (b, h, q, k),
            _ => {
                return Err(MaskError::BadRank {
                    what: "fixed-k top-k indices",
                    rank: dims.len(),
                    expected: "2 ([Sq, k]), 3 ([H, Sq, k]) or 4 ([B, H, Sq, k])",
                })
            }
        };
        TopKMask::from_fixed_k(
            MaskShape::new(batch, heads, seqlen_q, seqlen_k)?,
            k,
            indices,
        )
    }

    /// Number of stored keys (ones of the mask).
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// The sorted keys of row `(batch, head, q)`.
    pub fn keys(&self, batch: usize, head: usize, q: usize) -> &[u32] {
        let row = self.row(batch, head, q);
        &self.indices[self.offsets[row] as usize..self.offsets[row + 1] as usize]
    }

    /// The CSR row of query `q` of plane `(batch, head)` (broadcast applied).
    fn row(&self, batch: usize, head: usize, q: usize) -> usize {
        let b = broadcast_index(batch, self.shape.batch);
        let h = broadcast_index(head, self.shape.heads);
        (b * self.shape.heads + h) * self.shape.seqlen_q + q
    }

    /// Keys in rows `rows` of plane `(batch, head)` (contiguous in the CSR arrays).
    fn strip_len(&self, batch: usize, head: usize, rows: Range<usize>) -> usize {
        let first = self.row(batch, head, 0);
        (self.offsets[first + rows.end] - self.offsets[first + rows.start]) as usize
    }

    /// The CSR offsets (rows in `(batch, head, q)` order).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The CSR indices.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
}

fn check_seqlen_k(shape: MaskShape) -> Result<(), MaskError> {
    if shape.seqlen_k as u64 > u32::MAX as u64 {
        return Err(MaskError::TooLarge {
            what: "seqlen_k of a top-k mask",
            value: shape.seqlen_k as u64,
            limit: u32::MAX as u64,
        });
    }
    Ok(())
}

fn rows_of(shape: MaskShape) -> Result<usize, MaskError> {
    let planes = shape
        .batch
        .checked_mul(shape.heads)
        .ok_or(MaskError::TooLarge {
            what: "top-k heads (batch * heads overflows)",
            value: shape.heads as u64,
            limit: (usize::MAX / shape.batch) as u64,
        })?;
    planes
        .checked_mul(shape.seqlen_q)
        .ok_or(MaskError::TooLarge {
            what: "top-k seqlen_q (batch * heads * seqlen_q overflows)",
            value: shape.seqlen_q as u64,
            limit: (usize::MAX / planes) as u64,
        })
}

fn check_index(shape: MaskShape, row: usize, index: i64) -> Result<(), MaskError> {
    if index < 0 || index >= shape.seqlen_k as i64 {
        return Err(MaskError::IndexOutOfRange {
            what: "top-k key index",
            row: row as u64,
            index,
            bound: shape.seqlen_k as u64,
        });
    }
    Ok(())
}

/// [`MaskSource::strip_counts`] counts only strips with at most this many keys per
/// 64-bit word of their bits.
const COUNT_KEYS_PER_WORD: usize = 2;

impl MaskSource for TopKMask {
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
        let keys = self.keys(batch, head, q);
        let start = keys.partition_point(|&key| (key as usize) < k0);
        for &key in &keys[start..] {
            let i = key as usize - k0;
            if i >= cols {
                break;
            }
            out[i / 64] |= 1 << (i % 64);
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
        // Counting is a pass over the keys; without counts the packer classifies each
        // tile from the strip's bits, which it builds anyway once a tile is partial.
        // Count only where the keys are few next to those words (density up to 1/32):
        // then empty tiles are skipped without building or reading any bits.
        let keys_in_strip = self.strip_len(batch, head, rows.clone());
        let strip_words = rows.len() * self.shape.seqlen_k.div_ceil(64);
        if keys_in_strip > COUNT_KEYS_PER_WORD * strip_words {
            return false;
        }
        // Keys are sorted, so the keys of tile n are one run: store, per key, its
        // running count at its tile (`ends[n]` = keys in tiles `..=n`, stores only, no
        // branch and no read-modify-write chain), then difference the ends.
        let shift = block_n.is_power_of_two().then(|| block_n.trailing_zeros());
        let mut ends = alloc::vec![0usize; counts.len()];
        for q in rows {
            let keys = self.keys(batch, head, q);
            if keys.is_empty() {
                continue;
            }
            ends.fill(0);
            match shift {
                Some(shift) => {
                    for (i, &key) in keys.iter().enumerate() {
                        ends[(key >> shift) as usize] = i + 1;
                    }
                }
                None => {
                    for (i, &key) in keys.iter().enumerate() {
                        ends[key as usize / block_n] = i + 1;
                    }
                }
            }
            // Tiles without keys kept 0: they end where the tile before them ended.
            let mut before = 0usize;
            for (count, &end) in counts.iter_mut().zip(&ends) {
                let end = end.max(before);
                *count += (end - before) as u64;
                before = end;
            }
        }
        true
    }

    fn strip_bits(&self, batch: usize, head: usize, rows: Range<usize>, out: &mut [u64]) -> bool {
        let row_words = self.shape.seqlen_k.div_ceil(64);
        out.fill(0);
        for (q, dst) in rows.zip(out.chunks_exact_mut(row_words)) {
            // Sorted unique keys: build each word in a register and store it whole
            // after every key (no read-modify-write chain through memory); the last
            // store to a word carries all of its bits.
            let (mut word_index, mut word) = (usize::MAX, 0u64);
            for &key in self.keys(batch, head, q) {
                let index = key as usize / 64;
                word = if index == word_index { word } else { 0 } | 1 << (key % 64);
                word_index = index;
                dst[index] = word;
            }
        }
        true
    }

    fn fills_strips(&self) -> bool {
        true
    }

    fn get(&self, batch: usize, head: usize, q: usize, k: usize) -> bool {
        self.keys(batch, head, q).binary_search(&(k as u32)).is_ok()
    }
}
