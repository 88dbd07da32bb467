//! A tiled wgmma accumulator over a `block_m × block_n` tile, FlashAttention-3 style.

use fragmask_layout::{composition, right_inverse, Layout, LayoutError};

use crate::error::{lay, FragError};
use crate::util::tryl;
use crate::wgmma::{is_legal_n, WgmmaAccumulator, ATOM_M, WARPGROUP_THREADS};
use crate::{MAX_TILE_EXTENT, MAX_WARPGROUPS};

/// A tiled wgmma accumulator over a `block_m × block_n` tile, FA3 style.
///
/// The tiled MMA is CuTe's `TiledMMA<MMA_Atom<m64nNk16>, Layout<Shape<W,_1,_1>>>`
/// (W = `warpgroups`, FlashAttention-3's `AtomLayoutMNK`). The MMA tile is
/// `block_m × block_n`, or `block_n × block_m` under SwapAB (the MMA computes Sᵀ).
/// Along the MMA's M, 64-row atoms are dealt to the warpgroups round-robin, as CuTe's
/// `thrfrg_C` does (`zipped_divide` of the atom-rest mode by the W thread tile): atom
/// row-block `r` belongs to warpgroup `r % W` and is the thread's `mma_m = r / W`.
/// So warpgroup `w` owns rows `[64(w + W·mma_m), +64)`.
///
/// `value` indexes the thread's fragment `((2,2,V),MMA_M,MMA_N)` (V = N/8)
/// colexicographically; for MMA_M = MMA_N = 1 it is the PTX register index.
/// The thread index is `lane + 32·warp + 128·warpgroup`.
///
/// ```
/// use fragmask_gmma_frag::TiledAccumulator;
/// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
/// assert_eq!(acc.threads(), 256);
/// assert_eq!(acc.values_per_thread(), 64);
/// assert_eq!(acc.coord(128, 0), Ok((64, 0))); // warpgroup 1 starts at row 64
/// assert_eq!(acc.owner(64, 0), Ok((128, 0)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledAccumulator {
    block_m: u32,
    block_n: u32,
    warpgroups: u32,
    swap_ab: bool,
    atom: WgmmaAccumulator,
    mma_m: u32,
    mma_n: u32,
    /// `(thread, value) -> row + block_m*col`.
    tv: Layout,
    /// `row + block_m*col -> thread + threads*value`.
    inverse: Layout,
}

impl TiledAccumulator {
    /// The tiled accumulator whose wgmma atom spans the whole MMA N: N = `block_n`, or
    /// N = `block_m` under `swap_ab`.
    ///
    /// Errors: [`FragError::Warpgroups`] outside `1..=3`; [`FragError::IllegalN`] when
    /// the atom's N is not in `8..=256` step 8; [`FragError::BlockM`] (or
    /// [`FragError::BlockN`] under SwapAB) when the MMA's M side is not a multiple of
    /// `64 × warpgroups` (or exceeds [`MAX_TILE_EXTENT`]).
    pub const fn new(
        block_m: u32,
        block_n: u32,
        warpgroups: u32,
        swap_ab: bool,
    ) -> Result<TiledAccumulator, FragError> {
        let atom_n = if swap_ab { block_m } else { block_n };
        TiledAccumulator::with_atom_n(block_m, block_n, warpgroups, atom_n, swap_ab)
    }

    /// Like [`Self::new`] with an explicit atom N: the MMA's N side is tiled by
    /// `MMA_N = N_side / atom_n` atoms (CuTe's rest mode along N).
    pub const fn with_atom_n(
        block_m: u32,
        block_n: u32,
        warpgroups: u32,
        atom_n: u32,
        swap_ab: bool,
    ) -> Result<TiledAccumulator, FragError> {
        if warpgroups < 1 || warpgroups > MAX_WARPGROUPS {
            return Err(FragError::Warpgroups { warpgroups });
        }
        if !is_legal_n(atom_n) {
            return Err(FragError::IllegalN { n: atom_n });
        }
        let slab = ATOM_M * warpgroups;
        // The MMA's M side and N side, in the MMA's orientation.
        let (mma_rows, mma_cols) = if swap_ab {
            (block_n, block_m)
        } else {
            (block_m, block_n)
        };
        let rows_ok = mma_rows > 0 && mma_rows.is_multiple_of(slab) && mma_rows <= MAX_TILE_EXTENT;
        let cols_ok =
            mma_cols > 0 && mma_cols.is_multiple_of(atom_n) && mma_cols <= MAX_TILE_EXTENT;
        if !rows_ok {
            return Err(if swap_ab {
                FragError::BlockN {
                    block_n,
                    multiple_of: slab,
                }
            } else {
                FragError::BlockM {
                    block_m,
                    multiple_of: slab,
                }
            });
        }
        if !cols_ok {
            return Err(if swap_ab {
                FragError::BlockM {
                    block_m,
                    multiple_of: atom_n,
                }
            } else {
                FragError::BlockN {
                    block_n,
                    multiple_of: atom_n,
                }
            });
        }
        let atom = match WgmmaAccumulator::new(atom_n) {
            Ok(a) => a,
            Err(e) => return Err(e),
        };
        let mma_m = mma_rows / slab;
        let mma_n = mma_cols / atom_n;
        // Tile offset (column-major in the original block_m x block_n tile) of one step
        // along the MMA's rows and columns.
        let (row_step, col_step) = if swap_ab {
            (block_m as i64, 1)
        } else {
            (1, block_m as i64)
        };
        let tv = lay!(build_tv(
            &atom, row_step, col_step, warpgroups, mma_m, mma_n
        ));
        let inverse = lay!(right_inverse(&tv));
        Ok(TiledAccumulator {
            block_m,
            block_n,
            warpgroups,
            swap_ab,
            atom,
            mma_m,
            mma_n,
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

    /// MMA warpgroups (W).
    pub const fn warpgroups(&self) -> u32 {
        self.warpgroups
    }

    /// Whether the MMA computes the transposed tile (SwapAB).
    pub const fn swap_ab(&self) -> bool {
        self.swap_ab
    }

    /// The wgmma accumulator atom.
    pub const fn atom(&self) -> WgmmaAccumulator {
        self.atom
    }

    /// MMA_M: atoms along the MMA's M per warpgroup, `M_side / (64 × W)`.
    pub const fn mma_m(&self) -> u32 {
        self.mma_m
    }

    /// MMA_N: atoms along the MMA's N, `N_side / atom N` (1 for [`Self::new`]).
    pub const fn mma_n(&self) -> u32 {
        self.mma_n
    }

    /// Threads: `128 × warpgroups`.
    pub const fn threads(&self) -> u32 {
        WARPGROUP_THREADS * self.warpgroups
    }

    /// Values (f32 registers) per thread: `block_m × block_n / threads`.
    pub const fn values_per_thread(&self) -> u32 {
        self.block_m * self.block_n / self.threads()
    }

    /// The TV layout `(thread, value) -> row + block_m*col` (column-major tile index),
    /// shape `(((4,8,4),W),((2,2,V),MMA_M,MMA_N))`.
    pub const fn tv_layout(&self) -> Layout {
        self.tv
    }

    /// Its inverse, `row + block_m*col -> thread + threads*value`.
    pub const fn inverse_layout(&self) -> Layout {
        self.inverse
    }

    /// `(row, col)` in the `block_m × block_n` tile of `value` of `thread`, by
    /// evaluating [`Self::tv_layout`].
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
        let index = thread as i64 + self.threads() as i64 * value as i64;
        let offset = lay!(self.tv.eval(index));
        let block_m = self.block_m as i64;
        Ok(((offset % block_m) as u32, (offset / block_m) as u32))
    }

    /// `(thread, value)` holding `(row, col)`: the inverse of [`Self::coord`].
    pub const fn owner(&self, row: u32, col: u32) -> Result<(u32, u32), FragError> {
        if row >= self.block_m || col >= self.block_n {
            return Err(FragError::OutOfTile {
                row,
                col,
                block_m: self.block_m,
                block_n: self.block_n,
            });
        }
        let offset = row as i64 + self.block_m as i64 * col as i64;
        let index = lay!(self.inverse.eval(offset));
        let threads = self.threads() as i64;
        Ok(((index % threads) as u32, (index / threads) as u32))
    }
}

/// `(((4,8,4),W),((2,2,V),MMA_M,MMA_N))`: the atom's `CLayout_64xN` embedded in the
/// tile, with warpgroups and MMA_M dealt along the MMA's rows and MMA_N along its
/// columns.
const fn build_tv(
    atom: &WgmmaAccumulator,
    row_step: i64,
    col_step: i64,
    warpgroups: u32,
    mma_m: u32,
    mma_n: u32,
) -> Result<Layout, LayoutError> {
    let atom_m = ATOM_M as i64;
    let atom_n = atom.n() as i64;
    let w = warpgroups as i64;
    // Atom coordinate (m, n), offset m + 64n, -> tile offset m*row_step + n*col_step.
    let embed = tryl!(Layout::from_flat(&[atom_m, atom_n], &[row_step, col_step]));
    let atom_in_tile = tryl!(composition(&embed, &atom.c_layout()));
    let thread_mode = tryl!(Layout::from_modes(&[
        tryl!(atom_in_tile.mode(0)),
        tryl!(Layout::leaf(w, atom_m * row_step)),
    ]));
    let value_mode = tryl!(Layout::from_modes(&[
        tryl!(atom_in_tile.mode(1)),
        tryl!(Layout::leaf(mma_m as i64, w * atom_m * row_step)),
        tryl!(Layout::leaf(mma_n as i64, atom_n * col_step)),
    ]));
    Layout::from_modes(&[thread_mode, value_mode])
}
