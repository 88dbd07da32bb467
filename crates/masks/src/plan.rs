//! Compiled tile permutations: row-major tile bits → an encoding's words.
//!
//! An [`EncodedLayout`] gives every tile element its bit position. When the tile is a
//! power of two on both sides (`block_n >= 64`) and the positions fill the words
//! exactly, that map is, for every legal wgmma tiling, a *permutation of index bits*
//! (CuTe layouts of power-of-two shapes with power-of-two strides are; Triton's
//! LinearLayout calls this a linear layout over GF(2)). We check that property on the
//! derived table, and then execute it with word-level delta swaps (Knuth, TAOCP 7.1.3;
//! Warren, *Hacker's Delight* §7-5) instead of moving bits one at a time:
//!
//! - swapping an in-word index bit `a` with a word index bit `b`: one masked
//!   shift-xor per pair of words;
//! - swapping two in-word index bits: one masked shift-xor per word;
//! - permuting word index bits: a gather of whole words while writing out.
//!
//! A 128×128 FragmentNative tile (256 u64) takes 2 cross swaps and 3 in-word swaps:
//! about 6 simple operations per 64 bits. Other tiles (e.g. 192 rows for 3
//! warpgroups, `block_n = 96`) fall back to scattering set bits through the table.

use alloc::vec;
use alloc::vec::Vec;

use crate::encoding::EncodedLayout;
use crate::fused::FusedLayout;
use crate::MaskError;

/// Masks of the positions whose index bit `a` is 0.
const LOW: [u64; 6] = [
    0x5555_5555_5555_5555,
    0x3333_3333_3333_3333,
    0x0f0f_0f0f_0f0f_0f0f,
    0x00ff_00ff_00ff_00ff,
    0x0000_ffff_0000_ffff,
    0x0000_0000_ffff_ffff,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Swap in-word index bit `a` with word index bit `b`.
    Cross { a: u32, b: u32 },
    /// Swap in-word index bits `a < b`.
    Within { a: u32, b: u32 },
}

#[derive(Clone, Debug)]
enum Kind {
    Bits {
        ops: Vec<Op>,
        /// Output u64 word `j` is working word `gather[j]`.
        gather: Vec<u32>,
    },
    Scatter {
        positions: Vec<u32>,
    },
}

/// A tile encoder compiled from an [`EncodedLayout`].
#[derive(Clone, Debug)]
pub struct TilePlan {
    block_m: usize,
    block_n: usize,
    row_words: usize,
    words_per_tile: usize,
    kind: Kind,
    /// The one-pass dense path, when the layout is the FA3 structure it serves.
    fused: Option<FusedLayout>,
}

impl TilePlan {
    /// Compiles `layout`: index-bit swaps when the layout is a bit permutation, else a
    /// scatter table.
    pub fn new(layout: &EncodedLayout) -> TilePlan {
        let acc = layout.accumulator();
        let (block_m, block_n) = (acc.block_m() as usize, acc.block_n() as usize);
        let row_words = block_n.div_ceil(64);
        // Rows of whole u64 words: the input bit of (row, col) is row * block_n + col.
        let rows_are_words =
            block_m.is_power_of_two() && block_n.is_power_of_two() && block_n >= 64;
        let kind = rows_are_words
            .then(|| compile_bit_permutation(layout.positions(), layout.words_per_tile()))
            .flatten()
            .unwrap_or_else(|| Kind::Scatter {
                positions: layout.positions().to_vec(),
            });
        TilePlan {
            block_m,
            block_n,
            row_words,
            words_per_tile: layout.words_per_tile(),
            kind,
            fused: FusedLayout::new(layout),
        }
    }

    /// The fused dense-bytes encoder, if the layout has the FA3 structure.
    pub(crate) fn fused(&self) -> Option<&FusedLayout> {
        self.fused.as_ref()
    }

    /// u64 words per tile row in the input: `ceil(block_n / 64)`.
    pub fn row_words(&self) -> usize {
        self.row_words
    }

    /// u64 words of the input tile: `block_m × row_words`.
    pub fn tile_words(&self) -> usize {
        self.block_m * self.row_words
    }

    /// Output u32 words per tile.
    pub fn words_per_tile(&self) -> usize {
        self.words_per_tile
    }

    /// Whether the word-level bit-permutation path is used (else the scatter table).
    pub fn is_bit_permutation(&self) -> bool {
        matches!(self.kind, Kind::Bits { .. })
    }

    /// Encodes one tile. `tile`: `block_m × row_words` u64, bit `c % 64` of word
    /// `r * row_words + c / 64` = element `(r, c)`, bits past `block_n` zero; it is the
    /// working space of the bit-permutation path and is left scrambled. `out`
    /// (`words_per_tile` long) is overwritten.
    pub fn encode(&self, tile: &mut [u64], out: &mut [u32]) {
        debug_assert_eq!(tile.len(), self.tile_words());
        debug_assert_eq!(out.len(), self.words_per_tile);
        match &self.kind {
            Kind::Bits { ops, gather } => execute_bits(ops, gather, tile, out),
            Kind::Scatter { positions } => {
                out.fill(0);
                for row in 0..self.block_m {
                    let base = row * self.block_n;
                    for (wi, &word) in tile[row * self.row_words..(row + 1) * self.row_words]
                        .iter()
                        .enumerate()
                    {
                        let mut x = word;
                        while x != 0 {
                            let col = wi * 64 + x.trailing_zeros() as usize;
                            let p = positions[base + col] as usize;
                            out[p / 32] |= 1 << (p % 32);
                            x &= x - 1;
                        }
                    }
                }
            }
        }
    }
}

/// Re-encodes a tile's words from one encoding of a `block_m × block_n` tile into
/// another of the same tile (e.g. the forward's FragmentNative words into the
/// backward's, `crate::TransposedLists`).
///
/// Source bit `p` (word `p / 32`, bit `p % 32`) holds element `(row, col)` where
/// `from.position(row, col) == p`, and goes to `to.position(row, col)`: the composition
/// of the two derived tables. When both tables fill their words exactly and the tile is
/// a power of two, that map is again a permutation of index bits and runs as word-level
/// delta swaps, like [`TilePlan`]; otherwise set bits are scattered through the table.
#[derive(Clone, Debug)]
pub struct Transcoder {
    kind: Kind,
    src_words: usize,
    out_words: usize,
}

/// Marks a source bit no tile element maps to (always 0 in valid words).
const NO_ELEMENT: u32 = u32::MAX;

impl Transcoder {
    /// The transcoder from `from`'s words to `to`'s. Errors when the two layouts are of
    /// tiles of different sizes.
    pub fn new(from: &EncodedLayout, to: &EncodedLayout) -> Result<Transcoder, MaskError> {
        let (a, b) = (from.accumulator(), to.accumulator());
        for (what, expected, found) in [
            (
                "block_m of the target encoding's tile",
                a.block_m(),
                b.block_m(),
            ),
            (
                "block_n of the target encoding's tile",
                a.block_n(),
                b.block_n(),
            ),
        ] {
            if expected != found {
                return Err(MaskError::ShapeMismatch {
                    what,
                    expected: expected as u64,
                    found: found as u64,
                });
            }
        }
        let src_words = from.words_per_tile();
        let mut map = vec![NO_ELEMENT; src_words * 32];
        for (&p, &q) in from.positions().iter().zip(to.positions()) {
            map[p as usize] = q;
        }
        let exact = !map.contains(&NO_ELEMENT);
        let kind = exact
            .then(|| compile_bit_permutation(&map, to.words_per_tile()))
            .flatten()
            .unwrap_or(Kind::Scatter { positions: map });
        Ok(Transcoder {
            kind,
            src_words,
            out_words: to.words_per_tile(),
        })
    }

    /// Words of one source tile.
    pub fn src_words(&self) -> usize {
        self.src_words
    }

    /// Words of one output tile.
    pub fn out_words(&self) -> usize {
        self.out_words
    }

    /// u64 scratch words [`Self::run`] needs.
    pub fn scratch_words(&self) -> usize {
        match self.kind {
            Kind::Bits { .. } => self.src_words / 2,
            Kind::Scatter { .. } => 0,
        }
    }

    /// Whether the word-level bit-permutation path is used (else the scatter table).
    pub fn is_bit_permutation(&self) -> bool {
        matches!(self.kind, Kind::Bits { .. })
    }

    /// Re-encodes one tile: `src` ([`Self::src_words`] long) into `out`
    /// ([`Self::out_words`] long, overwritten); `scratch` is [`Self::scratch_words`]
    /// long. Bits of `src` no element maps to are ignored.
    pub fn run(&self, src: &[u32], scratch: &mut [u64], out: &mut [u32]) {
        debug_assert_eq!(src.len(), self.src_words);
        debug_assert_eq!(out.len(), self.out_words);
        match &self.kind {
            Kind::Bits { ops, gather } => {
                for (w, pair) in scratch.iter_mut().zip(src.chunks_exact(2)) {
                    *w = pair[0] as u64 | (pair[1] as u64) << 32;
                }
                execute_bits(ops, gather, scratch, out);
            }
            Kind::Scatter { positions } => {
                out.fill(0);
                for (wi, &word) in src.iter().enumerate() {
                    let mut x = word;
                    while x != 0 {
                        let p = positions[wi * 32 + x.trailing_zeros() as usize];
                        if p != NO_ELEMENT {
                            out[p as usize / 32] |= 1 << (p % 32);
                        }
                        x &= x - 1;
                    }
                }
            }
        }
    }
}

/// [`run_bits`], with AVX2 when this CPU has it.
fn execute_bits(ops: &[Op], gather: &[u32], tile: &mut [u64], out: &mut [u32]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was just detected on this CPU, which is the only requirement of
        // the target-feature function.
        unsafe { run_bits_avx2(ops, gather, tile, out) };
        return;
    }
    run_bits(ops, gather, tile, out);
}

/// The bit-permutation program: index-bit swaps in place, then the word gather.
#[inline(always)]
fn run_bits(ops: &[Op], gather: &[u32], tile: &mut [u64], out: &mut [u32]) {
    for op in ops {
        match *op {
            Op::Cross { a, b } => cross_swap(tile, a, b),
            Op::Within { a, b } => within_swap(tile, a, b),
        }
    }
    for (pair, &g) in out.chunks_exact_mut(2).zip(gather) {
        let word = tile[g as usize];
        pair[0] = word as u32;
        pair[1] = (word >> 32) as u32;
    }
}

/// [`run_bits`] compiled for AVX2 (the swap loops vectorize four words at a time).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
unsafe fn run_bits_avx2(ops: &[Op], gather: &[u32], tile: &mut [u64], out: &mut [u32]) {
    run_bits(ops, gather, tile, out)
}

/// Exchanges, for every pair of words `(i, i | 1 << b)`, the bits of word `i` whose
/// in-word index has bit `a` set with those of word `i | 1 << b` whose index has it
/// clear.
#[inline(always)]
fn cross_swap(words: &mut [u64], a: u32, b: u32) {
    let stride = 1usize << b;
    let delta = 1u32 << a;
    let mask = LOW[a as usize];
    for base in (0..words.len()).step_by(2 * stride) {
        let (lo, hi) = words[base..base + 2 * stride].split_at_mut(stride);
        for (x, y) in lo.iter_mut().zip(hi.iter_mut()) {
            let t = ((*x >> delta) ^ *y) & mask;
            *y ^= t;
            *x ^= t << delta;
        }
    }
}

/// Swaps in-word index bits `a < b` in every word.
#[inline(always)]
fn within_swap(words: &mut [u64], a: u32, b: u32) {
    let delta = (1u32 << b) - (1u32 << a);
    let mask = !LOW[a as usize] & LOW[b as usize];
    for x in words.iter_mut() {
        let t = ((*x >> delta) ^ *x) & mask;
        *x ^= t | (t << delta);
    }
}

/// The index-bit program of `positions` (source bit `s` goes to output bit
/// `positions[s]`), if it is a permutation of index bits onto exactly `out_words` u32
/// words: the source a power of two of at least 64 bits (whole u64 words).
fn compile_bit_permutation(positions: &[u32], out_words: usize) -> Option<Kind> {
    let total = positions.len();
    if !total.is_power_of_two() || total < 64 || out_words * 32 != total {
        return None;
    }
    let n = total.trailing_zeros() as usize;
    // sigma[k]: where source index bit k goes.
    let mut sigma = vec![0usize; n];
    let mut used = 0usize;
    for (k, s) in sigma.iter_mut().enumerate() {
        let d = positions[1 << k] as usize;
        if !d.is_power_of_two() || used & d != 0 {
            return None;
        }
        used |= d;
        *s = d.trailing_zeros() as usize;
    }
    if positions[0] != 0 {
        return None;
    }
    // Linearity: every position is the XOR of its index bits' images.
    for (s, &p) in positions.iter().enumerate() {
        let mut d = 0usize;
        let mut rest = s;
        while rest != 0 {
            d |= 1 << sigma[rest.trailing_zeros() as usize];
            rest &= rest - 1;
        }
        if d != p as usize {
            return None;
        }
    }
    let mut target = vec![0usize; n];
    for (k, &s) in sigma.iter().enumerate() {
        target[s] = k;
    }
    // at[p]: source index bit currently at position p; pos[k]: its inverse.
    let mut at: Vec<usize> = (0..n).collect();
    let mut pos: Vec<usize> = (0..n).collect();
    let mut ops = Vec::new();
    let swap = |at: &mut Vec<usize>, pos: &mut Vec<usize>, x: usize, y: usize| {
        at.swap(x, y);
        pos[at[x]] = x;
        pos[at[y]] = y;
    };
    // Bring every source bit that must end inside a word into the word.
    for p in 0..6 {
        let k = target[p];
        if pos[k] < 6 {
            continue;
        }
        let a = if sigma[at[p]] >= 6 {
            p
        } else {
            (0..6).find(|&a| sigma[at[a]] >= 6)?
        };
        ops.push(Op::Cross {
            a: a as u32,
            b: (pos[k] - 6) as u32,
        });
        let from = pos[k];
        swap(&mut at, &mut pos, a, from);
    }
    // Order the in-word bits.
    for p in 0..6 {
        if at[p] != target[p] {
            let q = pos[target[p]];
            ops.push(Op::Within {
                a: p.min(q) as u32,
                b: p.max(q) as u32,
            });
            swap(&mut at, &mut pos, p, q);
        }
    }
    // Word index bits: output word j takes the working word whose index bits carry the
    // same source bits.
    let words = total / 64;
    let gather = (0..words)
        .map(|j| {
            let mut c = 0usize;
            for bit in 0..n - 6 {
                if j >> bit & 1 == 1 {
                    c |= 1 << (pos[target[bit + 6]] - 6);
                }
            }
            c as u32
        })
        .collect();
    Some(Kind::Bits { ops, gather })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Encoding;
    use fragmask_gmma_frag::TiledAccumulator;

    #[test]
    fn fa3_128x128_fragment_native_compiles_to_five_swaps() {
        let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
        let layout = EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap();
        let plan = TilePlan::new(&layout);
        match &plan.kind {
            Kind::Bits { ops, .. } => assert!(ops.len() <= 5, "{ops:?}"),
            Kind::Scatter { .. } => panic!("expected the bit-permutation path"),
        }
    }
}
