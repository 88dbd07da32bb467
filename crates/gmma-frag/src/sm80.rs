//! SM80 `mma.sync.m16n8k16` fragments and FlashAttention-2's warp tiling.

use fragmask_layout::{right_inverse, Layout};

use crate::error::{lay, FragError};
use crate::tiled::build_tiled_tv;
use crate::util::literal;

/// Threads in a warp.
pub const WARP_THREADS: u32 = 32;
/// Most warps an [`Sm80TiledAccumulator`] may have.
pub const MAX_WARPS: u32 = 16;

/// CuTe's `SM80_16x8_Row` C layout of `mma.sync.m16n8k16` (f32 accumulate):
/// `((4,8),(2,2)):((32,1),(16,8))`, `(lane, value) -> m + 16*n` over 16 × 8
/// (`include/cute/atom/mma_traits_sm80.hpp`; PTX ISA, m16n8k16 fragment D).
pub const SM80_C_LAYOUT: Layout = literal(Layout::parse("((4,8),(2,2)):((32,1),(16,8))"));

/// The A layout of `mma.sync.m16n8k16` (16-bit A):
/// `((4,8),(2,2,2)):((32,1),(16,8,128))`, `(lane, value) -> m + 16*k` over 16 × 16.
pub const SM80_A_LAYOUT: Layout = literal(Layout::parse("((4,8),(2,2,2)):((32,1),(16,8,128))"));

/// The B layout of `mma.sync.m16n8k16` (16-bit B):
/// `((4,8),(2,2)):((16,1),(8,64))`, `(lane, value) -> n + 8*k` over 8 × 16 (N × K).
pub const SM80_B_LAYOUT: Layout = literal(Layout::parse("((4,8),(2,2)):((16,1),(8,64))"));

/// An `mma.sync.m16n8k16` accumulator tiled over a `block_m × block_n` tile as in
/// FlashAttention-2: `TiledMMA<Atom, Layout<Shape<Warps,_1,_1>>, Tile<16·Warps,_16,_16>>`.
/// Warp `w` owns rows `[16(w + warps·mma_m), +16)`; the thread's fragment is
/// `(4, MMA_M, MMA_N)` with `MMA_N = block_n / 8` (value = `c + 4·mma_m + 4·MMA_M·mma_n`).
///
/// ```
/// use fragmask_gmma_frag::Sm80TiledAccumulator;
/// let acc = Sm80TiledAccumulator::new(128, 64, 4).unwrap();
/// assert_eq!(acc.values_per_thread(), 64);
/// assert_eq!(acc.coord(32, 0), Ok((16, 0))); // warp 1 starts at row 16
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sm80TiledAccumulator {
    block_m: u32,
    block_n: u32,
    warps: u32,
    tv: Layout,
    inverse: Layout,
}

impl Sm80TiledAccumulator {
    /// `block_m` must be a positive multiple of `16·warps`, `block_n` of 8, both at most
    /// [`crate::MAX_TILE_EXTENT`]; `warps` in `1..=16`.
    pub const fn new(block_m: u32, block_n: u32, warps: u32) -> Result<Self, FragError> {
        if warps < 1 || warps > MAX_WARPS {
            return Err(FragError::Warps { warps });
        }
        let slab = 16 * warps;
        if block_m == 0 || !block_m.is_multiple_of(slab) || block_m > crate::MAX_TILE_EXTENT {
            return Err(FragError::BlockM {
                block_m,
                multiple_of: slab,
            });
        }
        if block_n == 0 || !block_n.is_multiple_of(8) || block_n > crate::MAX_TILE_EXTENT {
            return Err(FragError::BlockN {
                block_n,
                multiple_of: 8,
            });
        }
        let tv = lay!(build_tiled_tv(
            &SM80_C_LAYOUT,
            16,
            8,
            1,
            block_m as i64,
            warps,
            block_m / slab,
            block_n / 8
        ));
        let inverse = lay!(right_inverse(&tv));
        Ok(Sm80TiledAccumulator {
            block_m,
            block_n,
            warps,
            tv,
            inverse,
        })
    }

    /// Tile rows.
    pub const fn block_m(&self) -> u32 {
        self.block_m
    }

    /// Tile columns.
    pub const fn block_n(&self) -> u32 {
        self.block_n
    }

    /// Warps.
    pub const fn warps(&self) -> u32 {
        self.warps
    }

    /// Threads: `32 × warps`.
    pub const fn threads(&self) -> u32 {
        WARP_THREADS * self.warps
    }

    /// Values per thread: `block_m × block_n / threads`.
    pub const fn values_per_thread(&self) -> u32 {
        self.block_m * self.block_n / self.threads()
    }

    /// `(thread, value) -> row + block_m*col`, shape `(((4,8),Warps),((2,2),MMA_M,MMA_N))`.
    pub const fn tv_layout(&self) -> Layout {
        self.tv
    }

    /// `(row, col)` of `value` of `thread`, by evaluating [`Self::tv_layout`].
    pub const fn coord(&self, thread: u32, value: u32) -> Result<(u32, u32), FragError> {
        if thread >= self.threads() {
            return Err(FragError::ThreadOutOfRange {
                thread,
                threads: self.threads(),
            });
        }
        if value >= self.values_per_thread() {
            return Err(FragError::ValueOutOfRange {
                value,
                values_per_thread: self.values_per_thread(),
            });
        }
        let offset = lay!(self
            .tv
            .eval(thread as i64 + self.threads() as i64 * value as i64));
        let block_m = self.block_m as i64;
        Ok(((offset % block_m) as u32, (offset / block_m) as u32))
    }

    /// `(thread, value)` holding `(row, col)`.
    pub const fn owner(&self, row: u32, col: u32) -> Result<(u32, u32), FragError> {
        if row >= self.block_m || col >= self.block_n {
            return Err(FragError::OutOfTile {
                row,
                col,
                block_m: self.block_m,
                block_n: self.block_n,
            });
        }
        let index = lay!(self
            .inverse
            .eval(row as i64 + self.block_m as i64 * col as i64));
        let threads = self.threads() as i64;
        Ok(((index % threads) as u32, (index / threads) as u32))
    }
}
