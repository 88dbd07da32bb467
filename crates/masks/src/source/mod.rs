//! Mask sources: everything that describes a bool per `(batch, head, q, k)`.
//!
//! A source answers three kinds of questions, from cheapest to dearest; the packer asks
//! them in that order so it touches bits only where it must:
//!
//! 1. [`MaskSource::strip_counts`]: exact ones per tile along a row of tiles (index
//!    lists answer this in time proportional to their entries);
//! 2. [`MaskSource::region`]: whether a rectangle is known empty or full without looking
//!    (predicates answer this in O(1));
//! 3. [`MaskSource::row_bits`]: the bits of one row segment (everything answers this).
//!
//! Elements at `q >= seqlen_q` or `k >= seqlen_k` do not exist; sources are never
//! asked about them and never read out of bounds.

use core::ops::Range;

use crate::shape::broadcast_index;
use crate::{MaskError, MaskShape};

#[cfg(feature = "alloc")]
mod blocks;
#[cfg(feature = "alloc")]
mod predicate;
#[cfg(feature = "alloc")]
mod topk;

#[cfg(feature = "alloc")]
pub use blocks::{BlockSparseMask, BlockSparseOptions};
#[cfg(feature = "alloc")]
pub use predicate::{
    parse_predicate, Alignment, DocumentIds, Predicate, PredicateMask, MAX_PREDICATE_DEPTH,
    MAX_PREDICATE_NESTING,
};
#[cfg(feature = "alloc")]
pub use topk::TopKMask;

/// What is known about a rectangle of a mask without reading its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// Every element is 0.
    Empty,
    /// Every element is 1.
    Full,
    /// Unknown or mixed.
    Unknown,
}

/// Raw dense rows of one `(batch, head)` plane: element `(q, k)` is
/// `data[q * row_stride + k] != 0`.
#[derive(Clone, Copy, Debug)]
pub struct DenseRows<'a> {
    /// The plane's bytes, from element `(0, 0)`.
    pub data: &'a [u8],
    /// Bytes between consecutive rows.
    pub row_stride: usize,
}

/// A bool per `(batch, head, q, k)`, broadcast over batch and head where
/// [`MaskShape::batch`] / [`MaskShape::heads`] is 1.
///
/// `batch` and `head` passed to the methods are always below the source's own
/// `shape().batch` / `shape().heads`; `q` and `k` ranges are inside the mask.
pub trait MaskSource: Sync {
    /// The mask's shape.
    fn shape(&self) -> MaskShape;

    /// ORs `mask(q, k0 + i)` into bit `i % 64` of `out[i / 64]` for `i < cols`.
    /// `k0 + cols <= seqlen_k` and `cols <= 64 * out.len()`; other bits stay as they are.
    fn row_bits(
        &self,
        batch: usize,
        head: usize,
        q: usize,
        k0: usize,
        cols: usize,
        out: &mut [u64],
    );

    /// What is known about rows `rows` × columns `cols` (both non-empty, inside the
    /// mask) without reading bits. The default knows nothing.
    fn region(&self, batch: usize, head: usize, rows: Range<usize>, cols: Range<usize>) -> Region {
        let _ = (batch, head, rows, cols);
        Region::Unknown
    }

    /// If cheap, the exact number of ones in each `block_n`-column tile of rows `rows`:
    /// `counts[n] = ones in rows × [n·block_n, (n+1)·block_n)`, `counts` zeroed by the
    /// caller and `ceil(seqlen_k / block_n)` long. Returns false (leaving `counts`
    /// untouched) when the source cannot do better than reading bits.
    fn strip_counts(
        &self,
        batch: usize,
        head: usize,
        rows: Range<usize>,
        block_n: usize,
        counts: &mut [u64],
    ) -> bool {
        let _ = (batch, head, rows, block_n, counts);
        false
    }

    /// If cheap (proportional to the rows' bytes or ones, as for dense and index-list
    /// sources), writes every bit of rows `rows`: row `r` (from `rows.start`) occupies
    /// `out[r * row_words..(r + 1) * row_words]` with `row_words = ceil(seqlen_k / 64)`,
    /// bit `k % 64` of its word `k / 64` = `mask(q, k)`, bits past `seqlen_k` 0. Every
    /// word of `out` must be written (its contents on entry are unspecified). Returns
    /// false, writing nothing, when the source prefers to be read tile by tile.
    ///
    /// The packer reads a dense source row by row through this, so memory is streamed
    /// sequentially instead of in `block_m` strided rows per tile.
    fn strip_bits(&self, batch: usize, head: usize, rows: Range<usize>, out: &mut [u64]) -> bool {
        let _ = (batch, head, rows, out);
        false
    }

    /// Whether [`Self::strip_bits`] writes strips. The packer allocates a strip buffer
    /// (`block_m × ceil(seqlen_k / 64)` words) only for sources that say so, so a source
    /// read tile by tile (predicates) never costs memory proportional to `seqlen_k`
    /// per row block. Default false; override together with `strip_bits`.
    fn fills_strips(&self) -> bool {
        false
    }

    /// The raw bytes, if the source is a dense byte array.
    fn dense_rows(&self, batch: usize, head: usize) -> Option<DenseRows<'_>> {
        let _ = (batch, head);
        None
    }

    /// One element, `mask(batch, head, q, k)` (slow; for tests and spot checks).
    fn get(&self, batch: usize, head: usize, q: usize, k: usize) -> bool {
        let mut word = [0u64; 1];
        self.row_bits(batch, head, q, k, 1, &mut word);
        word[0] & 1 == 1
    }

    /// The mask as contiguous documents (causal or full within each, nothing across),
    /// the same for every batch and head, when the source knows it is one; the packer
    /// keeps them beside the lists ([`crate::PackedMask::documents`]). Default `None`.
    #[cfg(feature = "alloc")]
    fn documents(&self) -> Option<crate::Documents> {
        None
    }
}

impl<S: MaskSource + ?Sized> MaskSource for &S {
    fn shape(&self) -> MaskShape {
        (**self).shape()
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
        (**self).row_bits(batch, head, q, k0, cols, out)
    }
    fn region(&self, batch: usize, head: usize, rows: Range<usize>, cols: Range<usize>) -> Region {
        (**self).region(batch, head, rows, cols)
    }
    fn strip_counts(
        &self,
        batch: usize,
        head: usize,
        rows: Range<usize>,
        block_n: usize,
        counts: &mut [u64],
    ) -> bool {
        (**self).strip_counts(batch, head, rows, block_n, counts)
    }
    fn strip_bits(&self, batch: usize, head: usize, rows: Range<usize>, out: &mut [u64]) -> bool {
        (**self).strip_bits(batch, head, rows, out)
    }
    fn fills_strips(&self) -> bool {
        (**self).fills_strips()
    }
    fn dense_rows(&self, batch: usize, head: usize) -> Option<DenseRows<'_>> {
        (**self).dense_rows(batch, head)
    }
    #[cfg(feature = "alloc")]
    fn documents(&self) -> Option<crate::Documents> {
        (**self).documents()
    }
}

/// A dense mask: one byte per element (nonzero = 1), row-major, with optional leading
/// head and batch dimensions `[Sq, Sk]`, `[H, Sq, Sk]` or `[B, H, Sq, Sk]` (numpy
/// broadcasting: a leading 1 broadcasts). Borrows the bytes: no copy.
///
/// ```
/// use fragmask_masks::{DenseMask, MaskSource};
/// let bytes = [1u8, 0, 0, 1, 1, 1];
/// let mask = DenseMask::new(&bytes, &[2, 3]).unwrap();
/// assert!(mask.get(0, 0, 1, 2));
/// assert!(!mask.get(0, 0, 0, 1));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DenseMask<'a> {
    data: &'a [u8],
    shape: MaskShape,
}

impl<'a> DenseMask<'a> {
    /// Wraps `data` with shape `dims` (rank 2, 3 or 4; see the type's docs).
    pub fn new(data: &'a [u8], dims: &[usize]) -> Result<DenseMask<'a>, MaskError> {
        let (batch, heads, seqlen_q, seqlen_k) = match *dims {
            [q, k] => (1, 1, q, k),
            [h, q, k] => (1, h, q, k),
            [b, h, q, k] => (b, h, q, k),
            _ => {
                return Err(MaskError::BadRank {
                    what: "dense mask",
                    rank: dims.len(),
                    expected: "2 ([Sq, Sk]), 3 ([H, Sq, Sk]) or 4 ([B, H, Sq, Sk])",
                })
            }
        };
        let shape = MaskShape::new(batch, heads, seqlen_q, seqlen_k)?;
        let mut elements = 1usize;
        for &d in dims {
            elements = match elements.checked_mul(d) {
                Some(e) => e,
                None => {
                    return Err(MaskError::TooLarge {
                        what: "dense mask dimension (the element count overflows)",
                        value: d as u64,
                        limit: (usize::MAX / elements) as u64,
                    })
                }
            };
        }
        if data.len() != elements {
            return Err(MaskError::ShapeMismatch {
                what: "dense mask bytes",
                expected: elements as u64,
                found: data.len() as u64,
            });
        }
        Ok(DenseMask { data, shape })
    }

    /// The bytes.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    fn plane(&self, batch: usize, head: usize) -> &'a [u8] {
        let plane = self.shape.seqlen_q * self.shape.seqlen_k;
        let b = broadcast_index(batch, self.shape.batch);
        let h = broadcast_index(head, self.shape.heads);
        let start = (b * self.shape.heads + h) * plane;
        &self.data[start..start + plane]
    }
}

impl MaskSource for DenseMask<'_> {
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
        let row = &self.plane(batch, head)[q * self.shape.seqlen_k + k0..][..cols];
        for (i, chunk) in row.chunks(64).enumerate() {
            let mut word = [0u64; 1];
            crate::bits::pack_bytes(chunk, &mut word);
            out[i] |= word[0];
        }
    }

    fn strip_bits(&self, batch: usize, head: usize, rows: Range<usize>, out: &mut [u64]) -> bool {
        let sk = self.shape.seqlen_k;
        let row_words = sk.div_ceil(64);
        let plane = self.plane(batch, head);
        for (r, dst) in rows.zip(out.chunks_exact_mut(row_words)) {
            crate::bits::pack_bytes(&plane[r * sk..(r + 1) * sk], dst);
        }
        true
    }

    fn fills_strips(&self) -> bool {
        true
    }

    fn dense_rows(&self, batch: usize, head: usize) -> Option<DenseRows<'_>> {
        Some(DenseRows {
            data: self.plane(batch, head),
            row_stride: self.shape.seqlen_k,
        })
    }

    fn get(&self, batch: usize, head: usize, q: usize, k: usize) -> bool {
        self.plane(batch, head)[q * self.shape.seqlen_k + k] != 0
    }
}

/// A value of an index array (any integer element type a file may hold).
pub trait IndexValue: Copy {
    /// As i64 (u64 values above `i64::MAX` become `i64::MAX`, which is out of range
    /// everywhere).
    fn to_i64(self) -> i64;
}

macro_rules! index_value {
    ($($t:ty),*) => {$(
        impl IndexValue for $t {
            #[inline]
            fn to_i64(self) -> i64 {
                i64::try_from(self).unwrap_or(i64::MAX)
            }
        }
    )*};
}
index_value!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);
