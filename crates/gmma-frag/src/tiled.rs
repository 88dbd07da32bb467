//! A tiled wgmma accumulator over a `block_m × block_n` tile, FlashAttention-3 style.

use fragmask_layout::{composition, right_inverse, IntTuple, Layout, LayoutError};

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
    /// `(row index, col index) -> value`.
    rowcol: Layout,
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
        let tv = lay!(build_tiled_tv(
            &atom.c_layout(),
            ATOM_M as i64,
            atom_n as i64,
            row_step,
            col_step,
            warpgroups,
            mma_m,
            mma_n
        ));
        let inverse = lay!(right_inverse(&tv));
        let rowcol = lay!(rowcol(atom_n, mma_m, mma_n, swap_ab));
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
            rowcol,
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

impl TiledAccumulator {
    /// The thread mode of [`Self::tv_layout`], `((4,8,4),W)`: thread -> tile offset of
    /// the thread's value 0.
    pub const fn thread_layout(&self) -> Layout {
        match self.tv.mode(0) {
            Ok(l) => l,
            Err(_) => self.tv, // unreachable: tv is built rank 2
        }
    }

    /// The per-thread partition `((2,2,V),MMA_M,MMA_N)` as a layout from value index to
    /// tile offset relative to the thread's value 0 (the value mode of
    /// [`Self::tv_layout`]). `coord` = `thread_layout(t) + fragment_layout(v)`.
    pub const fn fragment_layout(&self) -> Layout {
        match self.tv.mode(1) {
            Ok(l) => l,
            Err(_) => self.tv, // unreachable: tv is built rank 2
        }
    }

    /// The rowcol view, a layout from `(row index, col index)` to value index
    /// (FlashAttention-3's `convert_layout_acc_rowcol`, docs/architecture.md fact 3):
    /// `((2,MMA_M),(2,V,MMA_N))` taking nrow = (mode 0.1, mode 1) and
    /// ncol = (mode 0.0, mode 0.2, mode 2) of the compact fragment
    /// `((2,2,V),MMA_M,MMA_N)`. Under SwapAB the two modes swap, so the view is always
    /// in the orientation of the `block_m × block_n` tile.
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_layout::Layout;
    /// let acc = TiledAccumulator::new(256, 128, 2, false).unwrap();
    /// assert_eq!(acc.rowcol_layout(), Layout::parse("((2,2),(2,16,1)):((2,64),(1,4,128))").unwrap());
    /// ```
    pub const fn rowcol_layout(&self) -> Layout {
        self.rowcol
    }

    /// Rows of the tile each thread holds: `size<0>` of the rowcol view.
    pub const fn rows_per_thread(&self) -> u32 {
        if self.swap_ab {
            self.atom.n() / 4 * self.mma_n
        } else {
            2 * self.mma_m
        }
    }

    /// Columns of the tile each thread holds: `size<1>` of the rowcol view.
    pub const fn cols_per_thread(&self) -> u32 {
        self.values_per_thread() / self.rows_per_thread()
    }

    /// The value index at `(row_index, col_index)` of the rowcol view.
    pub const fn rowcol_value(&self, row_index: u32, col_index: u32) -> Result<u32, FragError> {
        let rows = self.rows_per_thread();
        let cols = self.cols_per_thread();
        if row_index >= rows {
            return Err(FragError::IndexOutOfRange {
                index: row_index,
                len: rows,
            });
        }
        if col_index >= cols {
            return Err(FragError::IndexOutOfRange {
                index: col_index,
                len: cols,
            });
        }
        let index = row_index as i64 + rows as i64 * col_index as i64;
        Ok(lay!(self.rowcol.eval(index)) as u32)
    }

    /// The `row_index`-th tile row `thread` holds, in rowcol order (ascending).
    pub const fn row(&self, thread: u32, row_index: u32) -> Result<u32, FragError> {
        let value = match self.rowcol_value(row_index, 0) {
            Ok(v) => v,
            Err(e) => return Err(e),
        };
        match self.coord(thread, value) {
            Ok((row, _)) => Ok(row),
            Err(e) => Err(e),
        }
    }

    /// The `col_index`-th tile column `thread` holds, in rowcol order (ascending).
    pub const fn col(&self, thread: u32, col_index: u32) -> Result<u32, FragError> {
        let value = match self.rowcol_value(0, col_index) {
            Ok(v) => v,
            Err(e) => return Err(e),
        };
        match self.coord(thread, value) {
            Ok((_, col)) => Ok(col),
            Err(e) => Err(e),
        }
    }

    /// All rows `thread` holds, ascending.
    pub const fn rows_of(&self, thread: u32) -> Result<IndexList, FragError> {
        let mut list = IndexList::new();
        let mut i = 0;
        while i < self.rows_per_thread() {
            match self.row(thread, i) {
                Ok(r) => list.push(r),
                Err(e) => return Err(e),
            }
            i += 1;
        }
        Ok(list)
    }

    /// All columns `thread` holds, ascending.
    pub const fn cols_of(&self, thread: u32) -> Result<IndexList, FragError> {
        let mut list = IndexList::new();
        let mut j = 0;
        while j < self.cols_per_thread() {
            match self.col(thread, j) {
                Ok(c) => list.push(c),
                Err(e) => return Err(e),
            }
            j += 1;
        }
        Ok(list)
    }

    /// The threads holding part of tile row `row`, ascending. Without SwapAB these are
    /// the four lanes of one quad; under SwapAB a tile row is an MMA column, shared by
    /// the `32 × W` threads of one quad lane.
    pub const fn row_sharers(&self, row: u32) -> Result<IndexList, FragError> {
        if row >= self.block_m {
            return Err(self.out_of_tile(row, 0));
        }
        let mut seen = IndexList::new();
        let mut col = 0;
        while col < self.block_n {
            match self.owner(row, col) {
                Ok((thread, _)) => seen.insert_sorted(thread),
                Err(e) => return Err(e),
            }
            col += 1;
        }
        Ok(seen)
    }

    /// The threads holding part of tile column `col`, ascending.
    pub const fn col_sharers(&self, col: u32) -> Result<IndexList, FragError> {
        if col >= self.block_n {
            return Err(self.out_of_tile(0, col));
        }
        let mut seen = IndexList::new();
        let mut row = 0;
        while row < self.block_m {
            match self.owner(row, col) {
                Ok((thread, _)) => seen.insert_sorted(thread),
                Err(e) => return Err(e),
            }
            row += 1;
        }
        Ok(seen)
    }

    const fn out_of_tile(&self, row: u32, col: u32) -> FragError {
        FragError::OutOfTile {
            row,
            col,
            block_m: self.block_m,
            block_n: self.block_n,
        }
    }
}

/// The lane's position in its quad, `thread % 4`: it picks the column pair
/// `8v + 2·quad_lane + {0,1}` of every 8-column block (of MMA columns).
pub const fn quad_lane(thread: u32) -> u32 {
    thread % 4
}

/// The quad (group of four lanes) within the warp, `(thread % 32) / 4`: it picks the
/// MMA rows `16·warp + quad + {0, 8}`.
pub const fn quad(thread: u32) -> u32 {
    (thread % 32) / 4
}

/// The warp within the warpgroup, `(thread % 128) / 32`.
pub const fn warp_in_warpgroup(thread: u32) -> u32 {
    (thread % WARPGROUP_THREADS) / 32
}

/// The warp across all warpgroups, `thread / 32`.
pub const fn warp(thread: u32) -> u32 {
    thread / 32
}

/// The warpgroup, `thread / 128`.
pub const fn warpgroup(thread: u32) -> u32 {
    thread / WARPGROUP_THREADS
}

/// Most entries of an [`IndexList`].
pub const INDEX_LIST_CAPACITY: usize = 256;

/// A short ascending list of row, column or thread indices, returned by const queries
/// (no allocation). Holds at most [`INDEX_LIST_CAPACITY`] entries; every list the
/// queries return fits (tiles are at most [`MAX_TILE_EXTENT`] on a side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexList {
    items: [u32; INDEX_LIST_CAPACITY],
    len: usize,
}

impl IndexList {
    const fn new() -> IndexList {
        IndexList {
            items: [0; INDEX_LIST_CAPACITY],
            len: 0,
        }
    }

    const fn push(&mut self, value: u32) {
        if self.len < INDEX_LIST_CAPACITY {
            self.items[self.len] = value;
            self.len += 1;
        }
    }

    const fn insert_sorted(&mut self, value: u32) {
        let mut i = 0;
        while i < self.len {
            if self.items[i] == value {
                return;
            }
            if self.items[i] > value {
                break;
            }
            i += 1;
        }
        if self.len >= INDEX_LIST_CAPACITY {
            return;
        }
        let mut j = self.len;
        while j > i {
            self.items[j] = self.items[j - 1];
            j -= 1;
        }
        self.items[i] = value;
        self.len += 1;
    }

    /// Number of entries.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the list is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entry `i`, or `None` past the end.
    pub const fn get(&self, i: usize) -> Option<u32> {
        if i < self.len {
            Some(self.items[i])
        } else {
            None
        }
    }

    /// The entries as a slice.
    pub const fn as_slice(&self) -> &[u32] {
        self.items.split_at(self.len).0
    }
}

/// `((2,MMA_M),(2,V,MMA_N))` (or swapped) over the compact fragment
/// `((2,2,V),MMA_M,MMA_N)`.
const fn rowcol(atom_n: u32, mma_m: u32, mma_n: u32, swap_ab: bool) -> Result<Layout, LayoutError> {
    let v = (atom_n / 8) as i64;
    let fragment = tryl!(Layout::compact(tryl!(IntTuple::tuple(&[
        tryl!(IntTuple::flat(&[2, 2, v])),
        IntTuple::int(mma_m as i64),
        IntTuple::int(mma_n as i64),
    ]))));
    let inner = tryl!(fragment.mode(0));
    let nrow = tryl!(Layout::from_modes(&[
        tryl!(inner.mode(1)),
        tryl!(fragment.mode(1))
    ]));
    let ncol = tryl!(Layout::from_modes(&[
        tryl!(inner.mode(0)),
        tryl!(inner.mode(2)),
        tryl!(fragment.mode(2)),
    ]));
    if swap_ab {
        Layout::from_modes(&[ncol, nrow])
    } else {
        Layout::from_modes(&[nrow, ncol])
    }
}

/// `((atom threads, groups), (atom values, MMA_M, MMA_N))`: an atom's C layout
/// (`(thread, value) -> m + atom_m*n`) embedded in the tile, with thread groups
/// (warpgroups or warps) and then MMA_M dealt along the MMA's rows and MMA_N along its
/// columns. `row_step` / `col_step` are the tile offsets of one MMA row / column.
#[allow(clippy::too_many_arguments)]
pub(crate) const fn build_tiled_tv(
    atom_c: &Layout,
    atom_m: i64,
    atom_n: i64,
    row_step: i64,
    col_step: i64,
    groups: u32,
    mma_m: u32,
    mma_n: u32,
) -> Result<Layout, LayoutError> {
    let groups = groups as i64;
    // Atom coordinate (m, n), offset m + atom_m*n, -> tile offset m*row_step + n*col_step.
    let embed = tryl!(Layout::from_flat(&[atom_m, atom_n], &[row_step, col_step]));
    let atom_in_tile = tryl!(composition(&embed, atom_c));
    let thread_mode = tryl!(Layout::from_modes(&[
        tryl!(atom_in_tile.mode(0)),
        tryl!(Layout::leaf(groups, atom_m * row_step)),
    ]));
    let value_mode = tryl!(Layout::from_modes(&[
        tryl!(atom_in_tile.mode(1)),
        tryl!(Layout::leaf(mma_m as i64, groups * atom_m * row_step)),
        tryl!(Layout::leaf(mma_n as i64, atom_n * col_step)),
    ]));
    Layout::from_modes(&[thread_mode, value_mode])
}
