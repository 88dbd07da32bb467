//! The three bit orders of a partial tile, each derived from the fragment model.
//!
//! Every encoding stores one partial `block_m × block_n` tile as `u32` words and is
//! defined by a *bit position* for every tile element `(row, col)`: word `p / 32`,
//! bit `p % 32`. Bits that no element maps to are 0.
//!
//! - [`Encoding::FragmentNative`] (the default, normative): words `[threads][words_per_thread]`;
//!   bit `b` of word `w` of thread `t` is the element thread `t` holds at fragment value
//!   `32w + b`, i.e. `(row, col) = TiledAccumulator::coord(t, 32w + b)`. One thread's
//!   bits for the whole tile are contiguous: at 128×128 with 2 warpgroups, 64 bits, one
//!   coalesced 8-byte load.
//! - [`Encoding::QuadLane`] (docs/architecture.md fact 6, in the MMA's orientation): words
//!   `[mma_rows][4][words_per_quad]`; word group `q` of MMA row `R` holds, in the order
//!   quad lane `q`'s thread visits them, the bits of row `R` that the quad lane holds.
//!   Without SwapAB at `block_n = 128` that is bit `2(col/8) + col%2` of word
//!   `(col%8)/2` of row `row`. Under SwapAB the MMA's rows are tile columns.
//! - [`Encoding::RowMajor`] (FlashAttention-3's shared-memory mask): words
//!   `[block_m][ceil(block_n/32)]`, bit `col % 32` of word `col / 32` of row `row`, in
//!   the tile's own orientation.

use fragmask_gmma_frag::{quad_lane, TiledAccumulator};

use crate::MaskError;

/// How the bits of a partial tile are ordered in its words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// Per thread, in fragment-value order: `[threads][words_per_thread]`.
    #[default]
    FragmentNative,
    /// Per MMA row and quad lane: `[mma_rows][4][words_per_quad]`.
    QuadLane,
    /// Per tile row, columns ascending: `[block_m][ceil(block_n / 32)]`.
    RowMajor,
}

/// The per-tile shape of an encoding's words (rank 2 or 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordShape {
    dims: [usize; 3],
    rank: usize,
}

impl WordShape {
    /// The dimensions, outermost first.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank]
    }

    /// Words per tile: the product of the dimensions.
    pub const fn words(&self) -> usize {
        let mut n = 1;
        let mut i = 0;
        while i < self.rank {
            n *= self.dims[i];
            i += 1;
        }
        n
    }
}

/// What a thread loads per tile in one encoding (inspect's comparison).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadCost {
    /// Bytes of the tile's words each thread reads.
    pub bytes_per_thread: usize,
    /// Load instructions per thread per tile (widest vector load 16 bytes).
    pub loads_per_thread: usize,
    /// Bytes per tile.
    pub bytes_per_tile: usize,
    /// Where the loads go: "global" (straight into registers) or "shared".
    pub memory: &'static str,
}

impl Encoding {
    /// Every encoding, the default first.
    pub const ALL: [Encoding; 3] = [
        Encoding::FragmentNative,
        Encoding::QuadLane,
        Encoding::RowMajor,
    ];

    /// The name used on the command line and in file metadata.
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::FragmentNative => "fragment-native",
            Encoding::QuadLane => "quad-lane",
            Encoding::RowMajor => "row-major",
        }
    }

    /// The encoding named `name` (as [`Self::name`] spells it).
    pub fn from_name(name: &str) -> Option<Encoding> {
        Encoding::ALL.into_iter().find(|e| e.name() == name)
    }

    /// The per-tile word shape.
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_masks::Encoding;
    /// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// assert_eq!(Encoding::FragmentNative.word_shape(&acc).dims(), &[256, 2]);
    /// assert_eq!(Encoding::QuadLane.word_shape(&acc).dims(), &[128, 4, 1]);
    /// assert_eq!(Encoding::RowMajor.word_shape(&acc).dims(), &[128, 4]);
    /// ```
    pub const fn word_shape(self, acc: &TiledAccumulator) -> WordShape {
        match self {
            Encoding::FragmentNative => WordShape {
                dims: [acc.threads() as usize, words_per_thread(acc), 0],
                rank: 2,
            },
            Encoding::QuadLane => WordShape {
                dims: [mma_rows(acc), 4, words_per_quad(acc)],
                rank: 3,
            },
            Encoding::RowMajor => WordShape {
                dims: [
                    acc.block_m() as usize,
                    (acc.block_n() as usize).div_ceil(32),
                    0,
                ],
                rank: 2,
            },
        }
    }

    /// Words per tile.
    pub const fn words_per_tile(self, acc: &TiledAccumulator) -> usize {
        self.word_shape(acc).words()
    }

    /// The bit position (word `p / 32`, bit `p % 32`) of tile element `(row, col)`.
    ///
    /// Computed from the fragment model without tables: FragmentNative from
    /// [`TiledAccumulator::owner`] (the inverse of `coord`), QuadLane from `owner` and
    /// the rank of the value among the thread's values in the same MMA row. The packer
    /// builds its tables from `coord` instead (see `EncodedLayout`); tests check both
    /// agree.
    pub fn bit_position(
        self,
        acc: &TiledAccumulator,
        row: u32,
        col: u32,
    ) -> Result<usize, MaskError> {
        if row >= acc.block_m() || col >= acc.block_n() {
            return Err(MaskError::Config(
                fragmask_gmma_frag::FragError::OutOfTile {
                    row,
                    col,
                    block_m: acc.block_m(),
                    block_n: acc.block_n(),
                },
            ));
        }
        match self {
            Encoding::RowMajor => {
                Ok(row as usize * 32 * (acc.block_n() as usize).div_ceil(32) + col as usize)
            }
            Encoding::FragmentNative => {
                let (thread, value) = acc.owner(row, col)?;
                Ok(thread as usize * 32 * words_per_thread(acc) + value as usize)
            }
            Encoding::QuadLane => {
                let (thread, value) = acc.owner(row, col)?;
                let mma_row = mma_row_of(acc, row, col);
                let mut rank = 0usize;
                for earlier in 0..value {
                    let (r, c) = acc.coord(thread, earlier)?;
                    if mma_row_of(acc, r, c) == mma_row {
                        rank += 1;
                    }
                }
                Ok(quad_lane_position(acc, mma_row, quad_lane(thread), rank))
            }
        }
    }

    /// Reads element `(row, col)` from one tile's `words` (by [`Self::bit_position`]).
    pub fn read_bit(
        self,
        acc: &TiledAccumulator,
        words: &[u32],
        row: u32,
        col: u32,
    ) -> Result<bool, MaskError> {
        let p = self.bit_position(acc, row, col)?;
        let Some(word) = words.get(p / 32) else {
            return Err(MaskError::ShapeMismatch {
                what: "words of one tile",
                expected: self.words_per_tile(acc) as u64,
                found: words.len() as u64,
            });
        };
        Ok((word >> (p % 32)) & 1 == 1)
    }

    /// Bytes and load instructions per thread per tile when a kernel reads this
    /// encoding (16-byte vector loads at most).
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_masks::Encoding;
    /// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// let fnat = Encoding::FragmentNative.load_cost(&acc);
    /// assert_eq!((fnat.bytes_per_thread, fnat.loads_per_thread), (8, 1));
    /// let quad = Encoding::QuadLane.load_cost(&acc);
    /// assert_eq!((quad.bytes_per_thread, quad.loads_per_thread), (8, 2));
    /// let rows = Encoding::RowMajor.load_cost(&acc);
    /// assert_eq!((rows.bytes_per_thread, rows.loads_per_thread), (32, 2));
    /// ```
    pub const fn load_cost(self, acc: &TiledAccumulator) -> LoadCost {
        let bytes_per_tile = self.words_per_tile(acc) * 4;
        match self {
            Encoding::FragmentNative => {
                let bytes = words_per_thread(acc) * 4;
                LoadCost {
                    bytes_per_thread: bytes,
                    loads_per_thread: vector_loads(bytes),
                    bytes_per_tile,
                    memory: "global",
                }
            }
            Encoding::QuadLane => {
                // One word group per MMA row the thread holds.
                let rows = mma_rows_per_thread(acc);
                let bytes = words_per_quad(acc) * 4;
                LoadCost {
                    bytes_per_thread: rows * bytes,
                    loads_per_thread: rows * vector_loads(bytes),
                    bytes_per_tile,
                    memory: "shared",
                }
            }
            Encoding::RowMajor => {
                // The whole row for every tile row the thread holds (FA3's uint4 loads).
                let rows = acc.rows_per_thread() as usize;
                let bytes = (acc.block_n() as usize).div_ceil(32) * 4;
                LoadCost {
                    bytes_per_thread: rows * bytes,
                    loads_per_thread: rows * vector_loads(bytes),
                    bytes_per_tile,
                    memory: "shared",
                }
            }
        }
    }
}

const fn vector_loads(bytes: usize) -> usize {
    bytes.div_ceil(16)
}

/// `ceil(values_per_thread / 32)`: FragmentNative words per thread.
pub const fn words_per_thread(acc: &TiledAccumulator) -> usize {
    (acc.values_per_thread() as usize).div_ceil(32)
}

/// Rows of the MMA's own tile: `block_m`, or `block_n` under SwapAB.
pub const fn mma_rows(acc: &TiledAccumulator) -> usize {
    if acc.swap_ab() {
        acc.block_n() as usize
    } else {
        acc.block_m() as usize
    }
}

/// Columns of the MMA's own tile: `block_n`, or `block_m` under SwapAB.
pub const fn mma_cols(acc: &TiledAccumulator) -> usize {
    if acc.swap_ab() {
        acc.block_m() as usize
    } else {
        acc.block_n() as usize
    }
}

/// MMA rows each thread holds: `2 × MMA_M`.
const fn mma_rows_per_thread(acc: &TiledAccumulator) -> usize {
    2 * acc.mma_m() as usize
}

/// QuadLane words per (MMA row, quad lane): `ceil(mma_cols / 4 / 32)`.
pub const fn words_per_quad(acc: &TiledAccumulator) -> usize {
    (mma_cols(acc) / 4).div_ceil(32)
}

/// The MMA row of tile element `(row, col)`.
const fn mma_row_of(acc: &TiledAccumulator, row: u32, col: u32) -> u32 {
    if acc.swap_ab() {
        col
    } else {
        row
    }
}

const fn quad_lane_position(acc: &TiledAccumulator, mma_row: u32, lane: u32, rank: usize) -> usize {
    (mma_row as usize * 4 + lane as usize) * 32 * words_per_quad(acc) + rank
}

#[cfg(feature = "alloc")]
pub use table::EncodedLayout;

#[cfg(feature = "alloc")]
mod table {
    use alloc::sync::Arc;
    use alloc::vec;
    use alloc::vec::Vec;

    use fragmask_gmma_frag::{quad_lane, TiledAccumulator};

    use super::{mma_row_of, mma_rows, quad_lane_position, words_per_thread, Encoding};
    use crate::MaskError;

    /// An encoding's bit position for every element of the tile, derived by walking
    /// [`TiledAccumulator::coord`] over every `(thread, value)`: the composition of the
    /// tile's bit order with the fragment's TV layout.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct EncodedLayout {
        acc: TiledAccumulator,
        encoding: Encoding,
        /// `positions[row * block_n + col]`; shared, so that every packed mask can
        /// carry its layout without copying the table.
        positions: Arc<[u32]>,
        words_per_tile: usize,
    }

    impl EncodedLayout {
        /// Derives the table. Fails only if the fragment model is not a bijection onto
        /// the tile (never for a legal [`TiledAccumulator`]).
        ///
        /// ```
        /// use fragmask_gmma_frag::TiledAccumulator;
        /// use fragmask_masks::{EncodedLayout, Encoding};
        /// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
        /// let quad = EncodedLayout::derive(&acc, Encoding::QuadLane).unwrap();
        /// // Chapter 7: col 9 is quad lane 0's bit 3 of its row word.
        /// assert_eq!(quad.position(5, 9), (5 * 4 + 0) * 32 + 3);
        /// ```
        pub fn derive(acc: &TiledAccumulator, encoding: Encoding) -> Result<Self, MaskError> {
            let block_m = acc.block_m() as usize;
            let block_n = acc.block_n() as usize;
            let unset = u32::MAX;
            let mut positions = vec![unset; block_m * block_n];
            let mut place = |row: u32, col: u32, position: usize| -> Result<(), MaskError> {
                let slot = &mut positions[row as usize * block_n + col as usize];
                if *slot != unset {
                    return Err(MaskError::UnsupportedTile {
                        reason: "the fragment layout maps two values to one tile element",
                    });
                }
                *slot = position as u32;
                Ok(())
            };
            match encoding {
                Encoding::RowMajor => {
                    let words_per_row = block_n.div_ceil(32);
                    for row in 0..block_m as u32 {
                        for col in 0..block_n as u32 {
                            place(row, col, row as usize * 32 * words_per_row + col as usize)?;
                        }
                    }
                }
                Encoding::FragmentNative => {
                    let stride = 32 * words_per_thread(acc);
                    for thread in 0..acc.threads() {
                        for value in 0..acc.values_per_thread() {
                            let (row, col) = acc.coord(thread, value)?;
                            place(row, col, thread as usize * stride + value as usize)?;
                        }
                    }
                }
                Encoding::QuadLane => {
                    // rank[mma_row]: values of this thread already seen in that MMA row,
                    // i.e. the order in which the thread visits its columns of the row.
                    let mut rank = vec![0usize; mma_rows(acc)];
                    for thread in 0..acc.threads() {
                        let mut touched = Vec::new();
                        for value in 0..acc.values_per_thread() {
                            let (row, col) = acc.coord(thread, value)?;
                            let mma_row = mma_row_of(acc, row, col);
                            let r = &mut rank[mma_row as usize];
                            if *r == 0 {
                                touched.push(mma_row as usize);
                            }
                            if *r >= 32 * super::words_per_quad(acc) {
                                return Err(MaskError::UnsupportedTile {
                                    reason:
                                        "a quad lane holds more bits of an MMA row than its words",
                                });
                            }
                            place(
                                row,
                                col,
                                quad_lane_position(acc, mma_row, quad_lane(thread), *r),
                            )?;
                            *r += 1;
                        }
                        for t in touched {
                            rank[t] = 0;
                        }
                    }
                }
            }
            if positions.contains(&unset) {
                return Err(MaskError::UnsupportedTile {
                    reason: "the fragment layout does not cover the tile",
                });
            }
            Ok(EncodedLayout {
                acc: *acc,
                encoding,
                positions: positions.into(),
                words_per_tile: encoding.words_per_tile(acc),
            })
        }

        /// The tile configuration.
        pub fn accumulator(&self) -> &TiledAccumulator {
            &self.acc
        }

        /// The encoding.
        pub fn encoding(&self) -> Encoding {
            self.encoding
        }

        /// Words per tile.
        pub fn words_per_tile(&self) -> usize {
            self.words_per_tile
        }

        /// Bit position of `(row, col)`; panics outside the tile (use
        /// [`Encoding::bit_position`] for a checked query).
        #[inline]
        pub fn position(&self, row: usize, col: usize) -> usize {
            self.positions[row * self.acc.block_n() as usize + col] as usize
        }

        /// All positions, `[row * block_n + col]`.
        pub fn positions(&self) -> &[u32] {
            &self.positions
        }

        /// Encodes a tile given as `block_m × block_n` bools (row-major), one bit at a
        /// time: the reference the fast packer is tested against.
        pub fn encode_bools(&self, tile: &[bool]) -> Vec<u32> {
            let mut words = vec![0u32; self.words_per_tile];
            for (i, &bit) in tile.iter().enumerate() {
                if bit {
                    let p = self.positions[i] as usize;
                    words[p / 32] |= 1 << (p % 32);
                }
            }
            words
        }

        /// Decodes one tile's words to `block_m × block_n` bools (row-major).
        pub fn decode(&self, words: &[u32]) -> Result<Vec<bool>, MaskError> {
            if words.len() != self.words_per_tile {
                return Err(MaskError::ShapeMismatch {
                    what: "words of one tile",
                    expected: self.words_per_tile as u64,
                    found: words.len() as u64,
                });
            }
            Ok(self
                .positions
                .iter()
                .map(|&p| (words[p as usize / 32] >> (p % 32)) & 1 == 1)
                .collect())
        }

        /// Whether every bit no element maps to is 0 in `words`.
        pub fn padding_is_zero(&self, words: &[u32]) -> bool {
            let mut used = vec![0u32; self.words_per_tile];
            for &p in self.positions.iter() {
                used[p as usize / 32] |= 1 << (p % 32);
            }
            words.iter().zip(&used).all(|(w, u)| w & !u == 0)
        }
    }
}
