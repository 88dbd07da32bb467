//! A CPU emulator of the generated mask-apply functions.
//!
//! It runs, for every simulated thread, the very [`ApplyProgram`] the CUDA source was
//! printed from: the same [`Expr`](fragmask_kernels::emit::Expr) trees for the
//! per-thread lets, the load offsets, the word and bit of each value. It also checks
//! what the hardware would fault or silently get wrong: loads outside the tile, vector
//! loads that break their alignment, word indices outside a load, shifts of 32 or more.
//! So "emulator result == dense mask" for random masks proves the generated index logic
//! without a GPU.
//!
//! ```
//! use fragmask_check::emulator::Emulator;
//! use fragmask_masks::{EncodedLayout, Encoding, TiledAccumulator};
//! let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
//! let emu = Emulator::new(&acc, Encoding::QuadLane).unwrap();
//! // A tile whose only visible element is (5, 9).
//! let mut tile = vec![false; 128 * 128];
//! tile[5 * 128 + 9] = true;
//! let words = EncodedLayout::derive(&acc, Encoding::QuadLane).unwrap().encode_bools(&tile);
//! let kept = emu.run_tile(&words).unwrap();
//! let (thread, value) = acc.owner(5, 9).unwrap();
//! assert!(kept[(thread * 64 + value) as usize]);
//! assert_eq!(kept.iter().filter(|&&k| k).count(), 1);
//! ```

use core::fmt;

use fragmask_kernels::apply::{ApplyProgram, CodegenError};
use fragmask_kernels::emit::eval_lets;
use fragmask_masks::{Encoding, TiledAccumulator};

/// What the emulator found wrong in a program run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmulatorError {
    /// The program could not be generated.
    Codegen(CodegenError),
    /// The tile has the wrong number of words.
    TileWords {
        /// Words given.
        found: usize,
        /// Words per tile of the encoding.
        expected: usize,
    },
    /// An index expression failed to evaluate (overflow, division by zero, shift ≥ 32).
    Eval {
        /// The thread.
        thread: u32,
        /// What was being evaluated.
        what: String,
    },
    /// A load reads past the tile.
    OutOfTile {
        /// The thread.
        thread: u32,
        /// The fetch.
        fetch: usize,
        /// Its first word.
        offset: u32,
        /// Words it reads.
        words: u32,
        /// Words in the tile.
        tile_words: usize,
    },
    /// A vector load's address is not a multiple of its width.
    Misaligned {
        /// The thread.
        thread: u32,
        /// The fetch.
        fetch: usize,
        /// Its first word.
        offset: u32,
        /// The vector width in words.
        vector: u32,
    },
    /// A value's word is outside its load, or its bit is 32 or more.
    BadBit {
        /// The thread.
        thread: u32,
        /// The value.
        value: u32,
        /// The word index inside the load.
        word: u32,
        /// The bit.
        bit: u32,
    },
}

impl fmt::Display for EmulatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmulatorError::Codegen(e) => write!(f, "{e}"),
            EmulatorError::TileWords { found, expected } => {
                write!(f, "tile has {found} words, the encoding needs {expected}")
            }
            EmulatorError::Eval { thread, what } => {
                write!(f, "thread {thread}: {what} does not evaluate")
            }
            EmulatorError::OutOfTile {
                thread,
                fetch,
                offset,
                words,
                tile_words,
            } => write!(
                f,
                "thread {thread} fetch {fetch}: words {offset}..{} outside the {tile_words}-word tile",
                offset + words
            ),
            EmulatorError::Misaligned {
                thread,
                fetch,
                offset,
                vector,
            } => write!(
                f,
                "thread {thread} fetch {fetch}: word offset {offset} breaks its {vector}-word vector alignment"
            ),
            EmulatorError::BadBit {
                thread,
                value,
                word,
                bit,
            } => write!(
                f,
                "thread {thread} value {value}: word {word} / bit {bit} outside its load"
            ),
        }
    }
}

impl std::error::Error for EmulatorError {}

impl From<CodegenError> for EmulatorError {
    fn from(e: CodegenError) -> Self {
        EmulatorError::Codegen(e)
    }
}

/// The emulator of one encoding's apply program.
#[derive(Clone, Debug)]
pub struct Emulator {
    program: ApplyProgram,
    /// The lets' values per thread.
    lets: Vec<Vec<u32>>,
}

impl Emulator {
    /// Builds the program of `encoding` for `acc` (exactly what `fragmask codegen`
    /// prints) and evaluates its per-thread lets.
    pub fn new(acc: &TiledAccumulator, encoding: Encoding) -> Result<Self, EmulatorError> {
        let program = ApplyProgram::new(acc, encoding)?;
        let mut lets = Vec::with_capacity(acc.threads() as usize);
        for thread in 0..acc.threads() {
            lets.push(
                eval_lets(program.lets(), thread).ok_or_else(|| EmulatorError::Eval {
                    thread,
                    what: "a let".into(),
                })?,
            );
        }
        Ok(Self { program, lets })
    }

    /// The program being emulated.
    pub fn program(&self) -> &ApplyProgram {
        &self.program
    }

    /// Runs every thread on one tile's `words`: `kept[thread * values + value]` is
    /// whether the apply function leaves that accumulator value alone (mask bit 1).
    pub fn run_tile(&self, words: &[u32]) -> Result<Vec<bool>, EmulatorError> {
        let acc = self.program.accumulator();
        let values = acc.values_per_thread() as usize;
        let mut kept = Vec::with_capacity(acc.threads() as usize * values);
        for thread in 0..acc.threads() {
            self.run_thread(thread, words, &mut kept)?;
        }
        Ok(kept)
    }

    /// Runs one thread, appending its `values` results to `kept`.
    pub fn run_thread(
        &self,
        thread: u32,
        words: &[u32],
        kept: &mut Vec<bool>,
    ) -> Result<(), EmulatorError> {
        let program = &self.program;
        if words.len() != program.words_per_tile() {
            return Err(EmulatorError::TileWords {
                found: words.len(),
                expected: program.words_per_tile(),
            });
        }
        let lets = &self.lets[thread as usize];
        // The register array the load function fills.
        let mut loaded: Vec<u32> = Vec::with_capacity(program.loaded_words() as usize);
        for (k, fetch) in program.fetches().iter().enumerate() {
            let offset = fetch
                .offset
                .eval(thread, lets)
                .ok_or_else(|| EmulatorError::Eval {
                    thread,
                    what: format!("the offset of fetch {k}"),
                })?;
            if offset % fetch.vector != 0 {
                return Err(EmulatorError::Misaligned {
                    thread,
                    fetch: k,
                    offset,
                    vector: fetch.vector,
                });
            }
            let end = offset as usize + fetch.words as usize;
            if end > words.len() {
                return Err(EmulatorError::OutOfTile {
                    thread,
                    fetch: k,
                    offset,
                    words: fetch.words,
                    tile_words: words.len(),
                });
            }
            loaded.extend_from_slice(&words[offset as usize..end]);
        }
        let mut scope = lets.clone();
        for test in program.tests() {
            scope.truncate(lets.len());
            if let Some(col) = &test.column {
                let c = col.eval(thread, lets).ok_or_else(|| EmulatorError::Eval {
                    thread,
                    what: format!("the column of value {}", test.value),
                })?;
                scope.push(c);
            }
            let word = test.word.eval(thread, &scope);
            let bit = test.bit.eval(thread, &scope);
            let (Some(word), Some(bit)) = (word, bit) else {
                return Err(EmulatorError::Eval {
                    thread,
                    what: format!("the word or bit of value {}", test.value),
                });
            };
            let fetch = &program.fetches()[test.fetch];
            if word >= fetch.words || bit >= 32 {
                return Err(EmulatorError::BadBit {
                    thread,
                    value: test.value,
                    word,
                    bit,
                });
            }
            let w = loaded[(program.fetch_base(test.fetch) + word) as usize];
            kept.push((w >> bit) & 1 == 1);
        }
        Ok(())
    }

    /// Runs the tile and compares with `tile` (`block_m × block_n` bools, row-major):
    /// the `(thread, value)` pairs whose result differs from the mask bit of the element
    /// they hold (by [`TiledAccumulator::coord`]), at most `limit` of them.
    pub fn mismatches(
        &self,
        words: &[u32],
        tile: &[bool],
        limit: usize,
    ) -> Result<Vec<(u32, u32)>, EmulatorError> {
        let acc = self.program.accumulator();
        let kept = self.run_tile(words)?;
        Ok(mismatches_against_dense(acc, &kept, tile, limit))
    }
}

/// The `(thread, value)` pairs of `kept` (`[thread][value]`) that disagree with the
/// dense tile `tile` (`block_m × block_n` row-major) at `coord(thread, value)`; at most
/// `limit`.
pub fn mismatches_against_dense(
    acc: &TiledAccumulator,
    kept: &[bool],
    tile: &[bool],
    limit: usize,
) -> Vec<(u32, u32)> {
    let values = acc.values_per_thread();
    let block_n = acc.block_n() as usize;
    let mut out = Vec::new();
    for thread in 0..acc.threads() {
        for value in 0..values {
            let Ok((row, col)) = acc.coord(thread, value) else {
                continue;
            };
            let expected = tile[row as usize * block_n + col as usize];
            if kept[(thread * values + value) as usize] != expected && out.len() < limit {
                out.push((thread, value));
            }
        }
    }
    out
}
