//! One direction's tile lists, FlexAttention's `BlockMask` form.
//!
//! The forward pass walks, per `(batch, head, m_block)`, the `n_block`s whose tile is
//! partial and full (`kv_num_blocks`, `kv_indices`, `full_kv_num_blocks`,
//! `full_kv_indices`); the backward walks the same lists transposed, per
//! `(batch, head, n_block)` the `m_block`s (`q_*`). Both are a [`BlockLists`]: four
//! lists plus the partial tiles' offsets into their words, the shape and the checks in
//! one place. [`ListDirection`] says which of the two a value is, and so which names
//! its tensors carry in files (docs/masks.md).

use alloc::vec::Vec;

use crate::pack::try_vec;
use crate::shape::TileGrid;
use crate::{MaskError, TileClass};

/// Which way a [`BlockLists`] runs over the tile grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ListDirection {
    /// The forward pass's lists: a row per `(batch, head, m_block)` listing
    /// `n_block`s (FlexAttention's `kv_*`).
    Forward,
    /// The backward pass's transposed lists: a row per `(batch, head, n_block)`
    /// listing `m_block`s (FlexAttention's `q_*`).
    Transposed,
}

impl ListDirection {
    /// The five lists' names, as file tensors and FlexAttention's `BlockMask` attributes
    /// call them, in [`BlockLists::parts`]'s order.
    ///
    /// ```
    /// use fragmask_masks::ListDirection;
    /// assert_eq!(ListDirection::Forward.names()[0], "kv_num_blocks");
    /// assert_eq!(ListDirection::Transposed.names()[4], "q_tile_offsets");
    /// ```
    pub const fn names(self) -> [&'static str; 5] {
        match self {
            ListDirection::Forward => [
                "kv_num_blocks",
                "kv_indices",
                "full_kv_num_blocks",
                "full_kv_indices",
                "kv_tile_offsets",
            ],
            ListDirection::Transposed => [
                "q_num_blocks",
                "q_indices",
                "full_q_num_blocks",
                "full_q_indices",
                "q_tile_offsets",
            ],
        }
    }

    /// `(row blocks, listed blocks)` of `grid`: `(m_blocks, n_blocks)` forward,
    /// `(n_blocks, m_blocks)` transposed.
    pub const fn blocks(self, grid: &TileGrid) -> (usize, usize) {
        match self {
            ListDirection::Forward => (grid.m_blocks, grid.n_blocks),
            ListDirection::Transposed => (grid.n_blocks, grid.m_blocks),
        }
    }

    /// The name of the words the tile offsets point into (`words`, `q_words`).
    pub const fn words_name(self) -> &'static str {
        match self {
            ListDirection::Forward => "words",
            ListDirection::Transposed => "q_words",
        }
    }
}

/// One direction's tile lists: per row (`(batch, head, m_block)` forward,
/// `(batch, head, n_block)` transposed) the partial and the full blocks, ascending,
/// and each partial entry's index into the words.
///
/// Counts are `[rows]`; indices, full indices and tile offsets `[rows, row_len]`
/// row-major, entries past a row's count 0 (-1 in the tile offsets). `rows` is
/// `B × H × row blocks` with B and H as stored (1 when broadcast).
///
/// ```
/// use fragmask_masks::{BlockLists, ListDirection, TileClass};
/// // One row of 4 blocks: block 1 partial (tile 0), block 3 full.
/// let lists = BlockLists::new(
///     ListDirection::Forward,
///     1,
///     4,
///     [vec![1], vec![1, 0, 0, 0], vec![1], vec![3, 0, 0, 0], vec![0, -1, -1, -1]],
/// )
/// .unwrap();
/// assert_eq!(lists.tile_class(0, 1), TileClass::Partial(0));
/// assert_eq!(lists.tile_class(0, 3), TileClass::Full);
/// assert_eq!(lists.tile_class(0, 2), TileClass::Empty);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockLists {
    direction: ListDirection,
    row_len: usize,
    num_blocks: Vec<i32>,
    indices: Vec<i32>,
    full_num_blocks: Vec<i32>,
    full_indices: Vec<i32>,
    tile_offsets: Vec<i32>,
}

impl BlockLists {
    /// Lists of `rows` rows of `row_len` entries from their five vectors in
    /// [`Self::parts`]'s order; each must have its length (`rows` counts, `rows ×
    /// row_len` entries), else [`MaskError::ShapeMismatch`] names the list. Contents
    /// are checked by [`Self::validate`].
    pub fn new(
        direction: ListDirection,
        rows: usize,
        row_len: usize,
        lists: [Vec<i32>; 5],
    ) -> Result<BlockLists, MaskError> {
        let entries = rows.checked_mul(row_len).ok_or(MaskError::TooLarge {
            what: "tile list entries (rows * row length)",
            value: u64::MAX,
            limit: usize::MAX as u64,
        })?;
        let expected = [rows, entries, rows, entries, entries];
        for ((list, name), expected) in lists
            .iter()
            .zip(ENTRIES_NAMES[direction as usize])
            .zip(expected)
        {
            if list.len() != expected {
                return Err(MaskError::ShapeMismatch {
                    what: name,
                    expected: expected as u64,
                    found: list.len() as u64,
                });
            }
        }
        let [num_blocks, indices, full_num_blocks, full_indices, tile_offsets] = lists;
        Ok(BlockLists {
            direction,
            row_len,
            num_blocks,
            indices,
            full_num_blocks,
            full_indices,
            tile_offsets,
        })
    }

    /// Empty lists of `rows` rows of `row_len` entries: counts and indices 0, offsets
    /// -1; a typed error when the memory cannot be had.
    pub(crate) fn empty(
        direction: ListDirection,
        rows: usize,
        row_len: usize,
    ) -> Result<BlockLists, MaskError> {
        let what = match direction {
            ListDirection::Forward => "tile lists",
            ListDirection::Transposed => "transposed tile lists",
        };
        let entries = rows.checked_mul(row_len).ok_or(MaskError::TooLarge {
            what,
            value: u64::MAX,
            limit: usize::MAX as u64,
        })?;
        Ok(BlockLists {
            direction,
            row_len,
            num_blocks: try_vec(rows, 0, what)?,
            indices: try_vec(entries, 0, what)?,
            full_num_blocks: try_vec(rows, 0, what)?,
            full_indices: try_vec(entries, 0, what)?,
            tile_offsets: try_vec(entries, -1, what)?,
        })
    }

    /// Which way the lists run.
    pub fn direction(&self) -> ListDirection {
        self.direction
    }

    /// Rows (`B × H × row blocks`).
    pub fn rows(&self) -> usize {
        self.num_blocks.len()
    }

    /// Entries per row: the blocks a row can list (`n_blocks` forward, `m_blocks`
    /// transposed).
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Partial tiles per row, `[rows]` (`kv_num_blocks` / `q_num_blocks`).
    pub fn num_blocks(&self) -> &[i32] {
        &self.num_blocks
    }

    /// Partial tiles' blocks, ascending, `[rows, row_len]` (`kv_indices` /
    /// `q_indices`).
    pub fn indices(&self) -> &[i32] {
        &self.indices
    }

    /// Full tiles per row, `[rows]` (`full_kv_num_blocks` / `full_q_num_blocks`).
    pub fn full_num_blocks(&self) -> &[i32] {
        &self.full_num_blocks
    }

    /// Every row's tiles, partial and full (`num_blocks + full_num_blocks`, saturating):
    /// what the dispatch orders weigh (`crate::row_order`, `crate::tile_order`).
    pub fn tile_counts(&self) -> Vec<i32> {
        self.num_blocks()
            .iter()
            .zip(self.full_num_blocks())
            .map(|(&a, &b)| a.saturating_add(b))
            .collect()
    }

    /// Full tiles' blocks, ascending, `[rows, row_len]` (`full_kv_indices` /
    /// `full_q_indices`).
    pub fn full_indices(&self) -> &[i32] {
        &self.full_indices
    }

    /// Entry `j` of a row: the index (into the first dimension of the words) of partial
    /// tile `indices[row, j]`; -1 past the count (`kv_tile_offsets` /
    /// `q_tile_offsets`).
    pub fn tile_offsets(&self) -> &[i32] {
        &self.tile_offsets
    }

    /// The five lists, in the files' order (counts, indices, full counts, full
    /// indices, tile offsets; [`ListDirection::names`]).
    pub fn parts(&self) -> [&[i32]; 5] {
        [
            &self.num_blocks,
            &self.indices,
            &self.full_num_blocks,
            &self.full_indices,
            &self.tile_offsets,
        ]
    }

    /// The five lists, moved out in [`Self::parts`]'s order.
    pub fn into_parts(self) -> [Vec<i32>; 5] {
        [
            self.num_blocks,
            self.indices,
            self.full_num_blocks,
            self.full_indices,
            self.tile_offsets,
        ]
    }

    /// Mutable lists for a builder in this crate: (counts, indices, full counts, full
    /// indices, tile offsets).
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts_mut(
        &mut self,
    ) -> (&mut [i32], &mut [i32], &mut [i32], &mut [i32], &mut [i32]) {
        (
            &mut self.num_blocks,
            &mut self.indices,
            &mut self.full_num_blocks,
            &mut self.full_indices,
            &mut self.tile_offsets,
        )
    }

    /// Row `row` (below [`Self::rows`]): its partial blocks, their tile offsets, and its
    /// full blocks, each cut to the row's count (clamped to `0..=row_len`, so lists not
    /// yet validated never index out of the row).
    pub fn row(&self, row: usize) -> (&[i32], &[i32], &[i32]) {
        let entries = row * self.row_len..(row + 1) * self.row_len;
        let count = |n: i32| (n.max(0) as usize).min(self.row_len);
        let (np, nf) = (
            count(self.num_blocks[row]),
            count(self.full_num_blocks[row]),
        );
        (
            &self.indices[entries.clone()][..np],
            &self.tile_offsets[entries.clone()][..np],
            &self.full_indices[entries][..nf],
        )
    }

    /// The class of block `block` in row `row` (below [`Self::rows`]; a partial tile's
    /// offset is meaningful once the lists are validated).
    pub fn tile_class(&self, row: usize, block: usize) -> TileClass {
        let (partial, offsets, full) = self.row(row);
        let block = block as i32;
        if let Ok(j) = partial.binary_search(&block) {
            return TileClass::Partial(offsets[j] as usize);
        }
        if full.binary_search(&block).is_ok() {
            TileClass::Full
        } else {
            TileClass::Empty
        }
    }

    /// Full tiles in all.
    pub fn full_tiles(&self) -> u64 {
        self.full_num_blocks.iter().map(|&n| n.max(0) as u64).sum()
    }

    /// Whether every block of every row is partial, in block order, with its words at
    /// tile `row × row_len + block`: the lists then say nothing a kernel could not compute
    /// (a random or top-k token mask at 128×128 tiles), and the forward reads none of them
    /// (`AttentionKernel::with_dense_lists` in fragmask-kernels). False for no rows.
    pub fn dense_partial(&self) -> bool {
        let len = self.row_len;
        let Ok(full_row) = i32::try_from(len) else {
            return false;
        };
        self.rows() > 0
            && self.num_blocks.iter().all(|&n| n == full_row)
            && self.full_num_blocks.iter().all(|&n| n == 0)
            && self
                .indices
                .chunks_exact(len.max(1))
                .all(|row| row.iter().zip(0..).all(|(&b, e)| b == e))
            && self
                .tile_offsets
                .iter()
                .zip(0i64..)
                .all(|(&t, at)| i64::from(t) == at)
    }

    /// Bytes of the five lists (i32).
    pub fn bytes(&self) -> u64 {
        (self.num_blocks.len() * 2 + self.indices.len() * 3) as u64 * 4
    }

    /// Checks the lists against `grid` (whose row blocks they list, in their
    /// direction) and `partial_tiles` words: `rows` a whole number of planes of row
    /// blocks and `row_len` the listed blocks; per row, counts non-negative and
    /// together at most `row_len`, blocks ascending and in range, partial and full
    /// disjoint, no full tile sticking out of the mask (a ragged edge tile is never
    /// full, docs/masks.md), every offset in `0..partial_tiles` and every partial tile
    /// referenced exactly once.
    pub fn validate(&self, grid: &TileGrid, partial_tiles: usize) -> Result<(), MaskError> {
        let direction = self.direction;
        let names = direction.names();
        let (row_blocks, listed) = direction.blocks(grid);
        if self.row_len != listed || !self.rows().is_multiple_of(row_blocks.max(1)) {
            return Err(MaskError::ShapeMismatch {
                what: ROW_LEN_NAMES[direction as usize],
                expected: listed as u64,
                found: self.row_len as u64,
            });
        }
        let bad = |detail: &'static str| MaskError::Corrupt {
            what: match direction {
                ListDirection::Forward => "packed mask tile lists",
                ListDirection::Transposed => "packed mask transposed tile lists",
            },
            detail,
        };
        let mut referenced = try_vec(partial_tiles, false, "tile references")?;
        let mut total = 0usize;
        for row in 0..self.rows() {
            let (np, nf) = (self.num_blocks[row], self.full_num_blocks[row]);
            if np < 0 || nf < 0 || np as usize + nf as usize > listed {
                return Err(bad(match direction {
                    ListDirection::Forward => {
                        "a row's partial + full tile counts exceed n_blocks or are negative"
                    }
                    ListDirection::Transposed => {
                        "a row's partial + full tile counts exceed m_blocks or are negative"
                    }
                }));
            }
            let base = row * listed;
            let partial = &self.indices[base..base + np as usize];
            let full = &self.full_indices[base..base + nf as usize];
            for list in [partial, full] {
                for (j, &n) in list.iter().enumerate() {
                    if n < 0 || n as usize >= listed {
                        return Err(MaskError::IndexOutOfRange {
                            what: INDEX_NAMES[direction as usize],
                            row: row as u64,
                            index: n as i64,
                            bound: listed as u64,
                        });
                    }
                    if j > 0 && list[j - 1] >= n {
                        return Err(MaskError::Unsorted {
                            what: UNSORTED_NAMES[direction as usize],
                            row: row as u64,
                            previous: list[j - 1] as i64,
                            index: n as i64,
                        });
                    }
                }
            }
            if partial.iter().any(|n| full.binary_search(n).is_ok()) {
                return Err(bad("a tile is listed both partial and full"));
            }
            let row_block = row % row_blocks;
            if full.iter().any(|&n| {
                let (m, n) = match direction {
                    ListDirection::Forward => (row_block, n as usize),
                    ListDirection::Transposed => (n as usize, row_block),
                };
                grid.rows_in(m) != grid.block_m || grid.cols_in(n) != grid.block_n
            }) {
                return Err(bad(
                    "a full tile sticks out of the mask (seqlen_q / seqlen_k in the metadata \
                     disagree with the tile lists)",
                ));
            }
            for &tile in &self.tile_offsets[base..base + np as usize] {
                if tile < 0 || tile as usize >= partial_tiles {
                    return Err(MaskError::IndexOutOfRange {
                        what: names[4],
                        row: row as u64,
                        index: tile as i64,
                        bound: partial_tiles as u64,
                    });
                }
                if core::mem::replace(&mut referenced[tile as usize], true) {
                    return Err(bad(match direction {
                        ListDirection::Forward => "two tiles share one entry of words",
                        ListDirection::Transposed => {
                            "two transposed tiles share one entry of q_words"
                        }
                    }));
                }
            }
            total += np as usize;
        }
        if total != partial_tiles {
            return Err(bad(match direction {
                ListDirection::Forward => {
                    "the number of partial tiles differs from the first dimension of words"
                }
                ListDirection::Transposed => {
                    "the number of partial tiles differs from the first dimension of q_words"
                }
            }));
        }
        Ok(())
    }
}

/// `ShapeMismatch` names of each list's length, by direction.
const ENTRIES_NAMES: [[&str; 5]; 2] = [
    [
        "kv_num_blocks entries",
        "kv_indices entries",
        "full_kv_num_blocks entries",
        "full_kv_indices entries",
        "kv_tile_offsets entries",
    ],
    [
        "q_num_blocks entries",
        "q_indices entries",
        "full_q_num_blocks entries",
        "full_q_indices entries",
        "q_tile_offsets entries",
    ],
];

/// `ShapeMismatch` name of a row's length, by direction.
const ROW_LEN_NAMES: [&str; 2] = [
    "tile list row length (n_blocks = ceil(seqlen_k / block_n))",
    "transposed tile list row length (m_blocks = ceil(seqlen_q / block_m))",
];

/// `IndexOutOfRange` name of a listed block, by direction.
const INDEX_NAMES: [&str; 2] = [
    "packed mask tile column (kv_indices / full_kv_indices)",
    "packed mask transposed tile row (q_indices / full_q_indices)",
];

/// `Unsorted` name of a row's blocks, by direction.
const UNSORTED_NAMES: [&str; 2] = [
    "packed mask tile columns",
    "packed mask transposed tile rows",
];

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn new_names_the_list_whose_length_is_wrong() {
        let e = BlockLists::new(
            ListDirection::Transposed,
            2,
            3,
            [vec![0; 2], vec![0; 6], vec![0; 2], vec![0; 5], vec![-1; 6]],
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                MaskError::ShapeMismatch {
                    what: "full_q_indices entries",
                    expected: 6,
                    found: 5
                }
            ),
            "{e}"
        );
    }

    /// A 2 x 3 grid of 64 x 64 tiles over 128 x 150 (the last key block ragged): in
    /// each direction, lists with one partial and one full tile per plane, and the
    /// checks each corruption trips.
    #[test]
    fn validate_refuses_each_broken_rule_in_both_directions() {
        use crate::MaskShape;
        let acc = fragmask_gmma_frag::TiledAccumulator::new(64, 64, 1, false).unwrap();
        let grid = TileGrid::new(MaskShape::new(1, 1, 128, 150).unwrap(), &acc);
        // Forward: row 0 lists key block 2 partial (tile 0) and key block 0 full.
        // Transposed: row 2 (key block 2) lists query block 0 partial, row 0 query block 0 full.
        let good = |direction| match direction {
            ListDirection::Forward => [
                vec![1, 0],
                vec![2, 0, 0, 0, 0, 0],
                vec![1, 0],
                vec![0, 0, 0, 0, 0, 0],
                vec![0, -1, -1, -1, -1, -1],
            ],
            ListDirection::Transposed => [
                vec![0, 0, 1],
                vec![0, 0, 0, 0, 0, 0],
                vec![1, 0, 0],
                vec![0, 0, 0, 0, 0, 0],
                vec![-1, -1, -1, -1, 0, -1],
            ],
        };
        for direction in [ListDirection::Forward, ListDirection::Transposed] {
            let (rows, row_len) = direction.blocks(&grid);
            let lists = |parts| BlockLists::new(direction, rows, row_len, parts).unwrap();
            lists(good(direction)).validate(&grid, 1).unwrap();
            let partial_row = match direction {
                ListDirection::Forward => 0,
                ListDirection::Transposed => 2,
            };
            let at = partial_row * row_len;
            type Edit = fn(&mut [Vec<i32>; 5], usize, usize);
            type Check = fn(&MaskError) -> bool;
            let cases: [(&str, Edit, Check); 6] = [
                (
                    "negative count",
                    |l, r, _| l[0][r] = -1,
                    |e| matches!(e, MaskError::Corrupt { .. }),
                ),
                (
                    "count past the row",
                    |l, r, _| l[0][r] = 9,
                    |e| matches!(e, MaskError::Corrupt { .. }),
                ),
                (
                    "block out of range",
                    |l, _, at| l[1][at] = 7,
                    |e| matches!(e, MaskError::IndexOutOfRange { .. }),
                ),
                (
                    "offset out of range",
                    |l, _, at| l[4][at] = 1,
                    |e| matches!(e, MaskError::IndexOutOfRange { .. }),
                ),
                (
                    "unsorted",
                    |l, r, at| {
                        l[0][r] = 2;
                        l[1][at + 1] = 0;
                        l[4][at + 1] = 0;
                    },
                    |e| matches!(e, MaskError::Unsorted { .. }),
                ),
                (
                    "fewer partial tiles than words",
                    |l, r, _| l[0][r] = 0,
                    |e| matches!(e, MaskError::Corrupt { .. }),
                ),
            ];
            for (what, edit, expected) in cases {
                let mut parts = good(direction);
                edit(&mut parts, partial_row, at);
                let e = lists(parts).validate(&grid, 1).unwrap_err();
                assert!(expected(&e), "{direction:?}, {what}: {e}");
            }
            // A full tile in the ragged key block 2 sticks out of the mask.
            let mut parts = good(direction);
            match direction {
                ListDirection::Forward => parts[3][0] = 2,
                ListDirection::Transposed => {
                    parts[2] = vec![0, 0, 1];
                    parts[0] = vec![0, 0, 0];
                    parts[4][at] = -1;
                }
            }
            let partial_tiles = usize::from(direction == ListDirection::Forward);
            let e = lists(parts).validate(&grid, partial_tiles).unwrap_err();
            assert!(
                matches!(e, MaskError::Corrupt { .. }),
                "{direction:?}, ragged full: {e}"
            );
            // The other direction's lists under this direction: a shape mismatch.
            let (other, (other_rows, other_len)) = match direction {
                ListDirection::Forward => (
                    good(ListDirection::Transposed),
                    ListDirection::Transposed.blocks(&grid),
                ),
                ListDirection::Transposed => (
                    good(ListDirection::Forward),
                    ListDirection::Forward.blocks(&grid),
                ),
            };
            let other = BlockLists::new(direction, other_rows, other_len, other).unwrap();
            let e = other.validate(&grid, 1).unwrap_err();
            assert!(
                matches!(e, MaskError::ShapeMismatch { .. }),
                "{direction:?}: {e}"
            );
        }
    }
}
