//! The mask-apply program of one encoding: what each thread loads and which bit of
//! which loaded word masks each of its accumulator values.
//!
//! An [`ApplyProgram`] is the single source of truth for a mask-apply device function:
//! [`crate::apply::emit_functions`] prints it as CUDA C++, and the host's CPU emulator
//! (`fragmask_check::emulator`) executes the same [`Expr`] trees for every simulated
//! thread. The programs are built from the accumulator's TV layout
//! ([`FragmentTerms`]) and the encoding's word layout ([`Encoding::word_shape`]); no
//! index is typed by hand.

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_masks::Encoding;

use super::CodegenError;
use crate::emit::{eval_lets, Expr, FragmentTerms, Let};

/// Where a fetch reads the tile's words from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// Global memory (through L2, read-only path `ld.global.nc`): FragmentNative.
    Global,
    /// Shared memory, staged there by the kernel (`ld.shared`): QuadLane, RowMajor.
    Shared,
}

impl Space {
    /// `global` or `shared`.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
        }
    }
}

/// One contiguous run of a tile's `u32` words that a thread loads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetch {
    /// Memory space.
    pub space: Space,
    /// Offset of the first word from the tile's first word, in words.
    pub offset: Expr,
    /// Words loaded.
    pub words: u32,
    /// Widest vector (1, 2 or 4 words) whose alignment every thread's offset keeps; the
    /// fetch is `words / vector` vector loads.
    pub vector: u32,
    /// The layout the offset came from.
    pub comment: String,
}

/// Which loaded bit masks one accumulator value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Test {
    /// The accumulator value (register) index.
    pub value: u32,
    /// The fetch holding its word.
    pub fetch: usize,
    /// The word's index inside the fetch (a constant, or a run-time expression for the
    /// FlashAttention-3-style RowMajor code).
    pub word: Expr,
    /// The bit inside the word.
    pub bit: Expr,
    /// A per-value expression evaluated first and bound to `col` (RowMajor: the tile
    /// column), or `None`. `word` and `bit` address it as `Expr::Let(lets.len())`.
    pub column: Option<Expr>,
    /// Where the word and bit came from.
    pub comment: String,
}

/// A mask-apply program for one encoding and tile configuration.
#[derive(Clone, Debug)]
pub struct ApplyProgram {
    encoding: Encoding,
    terms: FragmentTerms,
    lets: Vec<Let>,
    fetches: Vec<Fetch>,
    tests: Vec<Test>,
    words_per_tile: usize,
}

impl ApplyProgram {
    /// Builds the program of `encoding` for `acc`.
    ///
    /// ```
    /// use fragmask_gmma_frag::TiledAccumulator;
    /// use fragmask_kernels::apply::{ApplyProgram, Space};
    /// use fragmask_masks::Encoding;
    /// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// let p = ApplyProgram::new(&acc, Encoding::FragmentNative).unwrap();
    /// assert_eq!(p.fetches().len(), 1);
    /// assert_eq!((p.fetches()[0].space, p.fetches()[0].words, p.fetches()[0].vector), (Space::Global, 2, 2));
    /// assert_eq!(p.loads_per_thread(), 1);
    /// ```
    pub fn new(acc: &TiledAccumulator, encoding: Encoding) -> Result<ApplyProgram, CodegenError> {
        let terms = FragmentTerms::derive(acc)?;
        let mut program = ApplyProgram {
            encoding,
            words_per_tile: encoding.words_per_tile(acc),
            terms,
            lets: Vec::new(),
            fetches: Vec::new(),
            tests: Vec::new(),
        };
        match encoding {
            Encoding::FragmentNative => program.build_fragment_native(),
            Encoding::QuadLane => program.build_quad_lane()?,
            Encoding::RowMajor => program.build_row_major(),
        }
        program.fix_vectors()?;
        Ok(program)
    }

    /// `[threads][words_per_thread]`: thread `t` loads words `t*W .. t*W+W`; value `v` is
    /// bit `v % 32` of word `v / 32`.
    fn build_fragment_native(&mut self) {
        let acc = *self.terms.accumulator();
        let shape = self.encoding.word_shape(&acc);
        let (threads, per_thread) = (shape.dims()[0], shape.dims()[1] as u32);
        self.fetches.push(Fetch {
            space: Space::Global,
            offset: Expr::Thread.times(Expr::lit(per_thread)),
            words: per_thread,
            vector: 1,
            comment: format!(
                "FragmentNative words ({threads},{per_thread}):({per_thread},1), thread-major"
            ),
        });
        for value in 0..acc.values_per_thread() {
            let (row_v, col_v) = self.terms.value_offset(value);
            self.tests.push(Test {
                value,
                fetch: 0,
                word: Expr::lit(value / 32),
                bit: Expr::lit(value % 32),
                column: None,
                comment: format!(
                    "value {value} = (row_t+{row_v}, col_t+{col_v}): FragmentNative word {} bit {}",
                    value / 32,
                    value % 32
                ),
            });
        }
    }

    /// `[mma_rows][4][words_per_quad]`: for each MMA row the thread holds, quad lane `q`
    /// loads its word group; value `v` is the bit at its rank among the thread's values
    /// of that row.
    fn build_quad_lane(&mut self) -> Result<(), CodegenError> {
        let acc = *self.terms.accumulator();
        let shape = self.encoding.word_shape(&acc);
        let (mma_rows, lanes, per_quad) = (
            shape.dims()[0],
            shape.dims()[1] as u32,
            shape.dims()[2] as u32,
        );
        let swap = acc.swap_ab();
        let (mma_row_t, what) = if swap {
            (
                self.terms.thread_col(),
                "column (SwapAB: MMA rows are tile columns)",
            )
        } else {
            (self.terms.thread_row(), "row")
        };
        self.lets.push(Let {
            name: "mma_row_t".into(),
            expr: mma_row_t,
            comment: format!(
                "tile {what} of the thread's value 0, from the {}",
                self.terms.thread_comment()
            ),
        });
        self.lets.push(Let {
            name: "quad_lane".into(),
            expr: self.terms.quad_lane()?,
            comment: format!(
                "leaf 0 of the {} (4 lanes of a quad)",
                self.terms.thread_comment()
            ),
        });
        // Distinct MMA rows of the thread's values, in value order, and each value's rank.
        let mut rows: Vec<u32> = Vec::new();
        let mut seen: Vec<u32> = Vec::new();
        for value in 0..acc.values_per_thread() {
            let (row_v, col_v) = self.terms.value_offset(value);
            let mma_row_v = if swap { col_v } else { row_v };
            let slot = match rows.iter().position(|&r| r == mma_row_v) {
                Some(s) => s,
                None => {
                    rows.push(mma_row_v);
                    seen.push(0);
                    self.fetches.push(Fetch {
                        space: Space::Shared,
                        offset: Expr::Let(0)
                            .plus(Expr::lit(mma_row_v))
                            .times(Expr::lit(lanes * per_quad))
                            .plus(Expr::Let(1).times(Expr::lit(per_quad))),
                        words: per_quad,
                        vector: 1,
                        comment: format!(
                            "QuadLane words ({mma_rows},{lanes},{per_quad}):({},{per_quad},1) at MMA row \
                             mma_row_t+{mma_row_v} (value mode), quad lane",
                            lanes * per_quad
                        ),
                    });
                    rows.len() - 1
                }
            };
            let rank = seen[slot];
            seen[slot] += 1;
            self.tests.push(Test {
                value,
                fetch: slot,
                word: Expr::lit(rank / 32),
                bit: Expr::lit(rank % 32),
                column: None,
                comment: format!(
                    "value {value} = (row_t+{row_v}, col_t+{col_v}): rank {rank} in its MMA row"
                ),
            });
        }
        Ok(())
    }

    /// `[block_m][ceil(block_n/32)]`, FlashAttention-3 forks' shared-memory mask: for each
    /// tile row the thread holds, load the whole row; per value, take the column from
    /// the layout at run time, select word `col / 32`, test bit `col % 32`.
    fn build_row_major(&mut self) {
        let acc = *self.terms.accumulator();
        let shape = self.encoding.word_shape(&acc);
        let (block_m, per_row) = (shape.dims()[0], shape.dims()[1] as u32);
        self.lets.push(Let {
            name: "row_t".into(),
            expr: self.terms.thread_row(),
            comment: format!(
                "tile row of the thread's value 0, from the {}",
                self.terms.thread_comment()
            ),
        });
        self.lets.push(Let {
            name: "col_t".into(),
            expr: self.terms.thread_col(),
            comment: format!(
                "tile column of the thread's value 0, from the {}",
                self.terms.thread_comment()
            ),
        });
        let mut rows: Vec<u32> = Vec::new();
        for value in 0..acc.values_per_thread() {
            let (row_v, col_v) = self.terms.value_offset(value);
            let slot = match rows.iter().position(|&r| r == row_v) {
                Some(s) => s,
                None => {
                    rows.push(row_v);
                    self.fetches.push(Fetch {
                        space: Space::Shared,
                        offset: Expr::Let(0)
                            .plus(Expr::lit(row_v))
                            .times(Expr::lit(per_row)),
                        words: per_row,
                        vector: 1,
                        comment: format!(
                            "RowMajor words ({block_m},{per_row}):({per_row},1), whole tile row \
                             row_t+{row_v} (value mode)"
                        ),
                    });
                    rows.len() - 1
                }
            };
            let column = Expr::Let(1).plus(Expr::lit(col_v));
            // The per-value `col` binding is addressed as the let after the program's lets.
            let col = Expr::Let(self.lets.len());
            self.tests.push(Test {
                value,
                fetch: slot,
                word: col.clone().div_by(32),
                bit: col.rem_by(32),
                column: Some(column),
                comment: format!(
                    "value {value} = (row_t+{row_v}, col_t+{col_v}): RowMajor word col/32, bit col%32"
                ),
            });
        }
    }

    /// Sets each fetch's vector width to the widest of 4, 2, 1 words that divides its
    /// length and every thread's offset (checked by evaluating the offset for all
    /// threads).
    fn fix_vectors(&mut self) -> Result<(), CodegenError> {
        let threads = self.terms.accumulator().threads();
        let mut lets_per_thread = Vec::with_capacity(threads as usize);
        for thread in 0..threads {
            lets_per_thread.push(eval_lets(&self.lets, thread).ok_or_else(|| {
                CodegenError::NotSeparable(format!("a let does not evaluate for thread {thread}"))
            })?);
        }
        for fetch in &mut self.fetches {
            let mut vector = 4;
            while vector > 1 {
                let fits = fetch.words % vector == 0
                    && (0..threads).all(|t| {
                        fetch
                            .offset
                            .eval(t, &lets_per_thread[t as usize])
                            .is_some_and(|o| o % vector == 0)
                    });
                if fits {
                    break;
                }
                vector /= 2;
            }
            fetch.vector = vector;
        }
        Ok(())
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The tile configuration.
    pub fn accumulator(&self) -> &TiledAccumulator {
        self.terms.accumulator()
    }

    /// The layout decomposition the program was built from.
    pub fn terms(&self) -> &FragmentTerms {
        &self.terms
    }

    /// Per-thread values computed once, in order (the emitted prologue).
    pub fn lets(&self) -> &[Let] {
        &self.lets
    }

    /// The loads, in order; their words are concatenated into one register array.
    pub fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }

    /// One test per accumulator value, in value order.
    pub fn tests(&self) -> &[Test] {
        &self.tests
    }

    /// Words of one tile in the encoding.
    pub fn words_per_tile(&self) -> usize {
        self.words_per_tile
    }

    /// Words each thread loads (the register array's length).
    pub fn loaded_words(&self) -> u32 {
        self.fetches.iter().map(|f| f.words).sum()
    }

    /// Load instructions each thread issues per tile.
    pub fn loads_per_thread(&self) -> u32 {
        self.fetches.iter().map(|f| f.words / f.vector).sum()
    }

    /// Position of fetch `fetch`'s first word in the concatenated register array.
    pub fn fetch_base(&self, fetch: usize) -> u32 {
        self.fetches[..fetch].iter().map(|f| f.words).sum()
    }

    /// If every group of `group_threads` consecutive threads reads exactly the words
    /// `[g * size, (g + 1) * size)` of the tile (group `g`), that `size`: then each
    /// group (e.g. each warpgroup) can stage its own share of the tile and synchronise
    /// with a named barrier of its own. Evaluated over every thread.
    pub fn group_words(&self, group_threads: u32) -> Option<u32> {
        let threads = self.accumulator().threads();
        if group_threads == 0 || threads % group_threads != 0 {
            return None;
        }
        let groups = threads / group_threads;
        let total = self.words_per_tile as u32;
        if total % groups != 0 {
            return None;
        }
        let size = total / groups;
        for g in 0..groups {
            let mut read = vec![false; self.words_per_tile];
            for thread in g * group_threads..(g + 1) * group_threads {
                let lets = eval_lets(&self.lets, thread)?;
                for f in &self.fetches {
                    let o = f.offset.eval(thread, &lets)?;
                    for w in o..o + f.words {
                        *read.get_mut(w as usize)? = true;
                    }
                }
            }
            let ok = read
                .iter()
                .enumerate()
                .all(|(w, &r)| r == (w as u32 >= g * size && (w as u32) < (g + 1) * size));
            if !ok {
                return None;
            }
        }
        Some(size)
    }

    /// Where the words come from (every fetch of a program uses one space).
    pub fn space(&self) -> Space {
        self.fetches.first().map_or(Space::Global, |f| f.space)
    }
}
