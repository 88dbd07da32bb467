//! The logical shape of a mask and the tile grid over it.

use fragmask_gmma_frag::TiledAccumulator;

use crate::MaskError;

/// The logical shape of a mask: a bool per `(batch, head, q, k)`.
///
/// `batch` or `heads` equal to 1 means the mask is broadcast over that dimension (the
/// packed file then has B = 1 or H = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaskShape {
    /// Batch entries (1 = broadcast).
    pub batch: usize,
    /// Heads (1 = broadcast).
    pub heads: usize,
    /// Query length, Sq (rows).
    pub seqlen_q: usize,
    /// Key length, Sk (columns).
    pub seqlen_k: usize,
}

impl MaskShape {
    /// A shape; every extent must be at least 1.
    ///
    /// ```
    /// use fragmask_masks::MaskShape;
    /// let s = MaskShape::new(1, 8, 1000, 4096).unwrap();
    /// assert_eq!(s.elements(), 8 * 1000 * 4096);
    /// ```
    pub const fn new(
        batch: usize,
        heads: usize,
        seqlen_q: usize,
        seqlen_k: usize,
    ) -> Result<MaskShape, MaskError> {
        if batch == 0 {
            return Err(MaskError::EmptyDimension { what: "batch" });
        }
        if heads == 0 {
            return Err(MaskError::EmptyDimension { what: "heads" });
        }
        if seqlen_q == 0 {
            return Err(MaskError::EmptyDimension { what: "seqlen_q" });
        }
        if seqlen_k == 0 {
            return Err(MaskError::EmptyDimension { what: "seqlen_k" });
        }
        Ok(MaskShape {
            batch,
            heads,
            seqlen_q,
            seqlen_k,
        })
    }

    /// `batch × heads × seqlen_q × seqlen_k`, saturating.
    pub const fn elements(&self) -> u64 {
        (self.batch as u64)
            .saturating_mul(self.heads as u64)
            .saturating_mul(self.seqlen_q as u64)
            .saturating_mul(self.seqlen_k as u64)
    }

    /// The shape two broadcast-compatible masks combine to: batch and heads broadcast
    /// (1 against n gives n); the sequence lengths must agree.
    pub const fn broadcast(self, other: MaskShape) -> Result<MaskShape, MaskError> {
        let batch = match broadcast_dim(self.batch, other.batch) {
            Some(b) => b,
            None => {
                return Err(MaskError::ShapeMismatch {
                    what: "batch (broadcast)",
                    expected: self.batch as u64,
                    found: other.batch as u64,
                })
            }
        };
        let heads = match broadcast_dim(self.heads, other.heads) {
            Some(h) => h,
            None => {
                return Err(MaskError::ShapeMismatch {
                    what: "heads (broadcast)",
                    expected: self.heads as u64,
                    found: other.heads as u64,
                })
            }
        };
        if self.seqlen_q != other.seqlen_q {
            return Err(MaskError::ShapeMismatch {
                what: "seqlen_q",
                expected: self.seqlen_q as u64,
                found: other.seqlen_q as u64,
            });
        }
        if self.seqlen_k != other.seqlen_k {
            return Err(MaskError::ShapeMismatch {
                what: "seqlen_k",
                expected: self.seqlen_k as u64,
                found: other.seqlen_k as u64,
            });
        }
        Ok(MaskShape {
            batch,
            heads,
            seqlen_q: self.seqlen_q,
            seqlen_k: self.seqlen_k,
        })
    }
}

const fn broadcast_dim(a: usize, b: usize) -> Option<usize> {
    if a == b || b == 1 {
        Some(a)
    } else if a == 1 {
        Some(b)
    } else {
        None
    }
}

/// The index of `index` in a dimension of extent `extent` broadcast to a larger one:
/// 0 when `extent == 1`.
#[inline]
pub(crate) const fn broadcast_index(index: usize, extent: usize) -> usize {
    if extent == 1 {
        0
    } else {
        index
    }
}

/// The tile grid of a mask shape under a tile configuration: `m_blocks × n_blocks`
/// tiles of `block_m × block_n`, the last row and column of tiles possibly ragged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileGrid {
    /// Tile rows.
    pub block_m: usize,
    /// Tile columns.
    pub block_n: usize,
    /// `ceil(seqlen_q / block_m)`.
    pub m_blocks: usize,
    /// `ceil(seqlen_k / block_n)`.
    pub n_blocks: usize,
    /// The mask's shape.
    pub shape: MaskShape,
}

impl TileGrid {
    /// The grid of `shape` under `acc`'s tile.
    pub const fn new(shape: MaskShape, acc: &TiledAccumulator) -> TileGrid {
        let block_m = acc.block_m() as usize;
        let block_n = acc.block_n() as usize;
        TileGrid {
            block_m,
            block_n,
            m_blocks: shape.seqlen_q.div_ceil(block_m),
            n_blocks: shape.seqlen_k.div_ceil(block_n),
            shape,
        }
    }

    /// Rows of tile row `m_block` inside the mask (`block_m` except at the ragged edge).
    pub const fn rows_in(&self, m_block: usize) -> usize {
        let start = m_block * self.block_m;
        let end = start + self.block_m;
        if end > self.shape.seqlen_q {
            self.shape.seqlen_q - start
        } else {
            self.block_m
        }
    }

    /// Columns of tile column `n_block` inside the mask.
    pub const fn cols_in(&self, n_block: usize) -> usize {
        let start = n_block * self.block_n;
        let end = start + self.block_n;
        if end > self.shape.seqlen_k {
            self.shape.seqlen_k - start
        } else {
            self.block_n
        }
    }

    /// Tiles in total: `batch × heads × m_blocks × n_blocks`, saturating.
    pub const fn tiles(&self) -> u64 {
        (self.shape.batch as u64)
            .saturating_mul(self.shape.heads as u64)
            .saturating_mul(self.m_blocks as u64)
            .saturating_mul(self.n_blocks as u64)
    }
}
