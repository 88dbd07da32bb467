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
        let kind =
            compile_bit_permutation(layout, block_m, block_n).unwrap_or_else(|| Kind::Scatter {
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
            Kind::Bits { ops, gather } => {
                #[cfg(all(feature = "std", target_arch = "x86_64"))]
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: AVX2 was just detected on this CPU, which is the only
                    // requirement of the target-feature function.
                    unsafe { run_bits_avx2(ops, gather, tile, out) };
                    return;
                }
                run_bits(ops, gather, tile, out);
            }
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

/// The index-bit program, if `layout` is a bit permutation of a power-of-two tile.
fn compile_bit_permutation(layout: &EncodedLayout, block_m: usize, block_n: usize) -> Option<Kind> {
    let total = block_m * block_n;
    if !block_m.is_power_of_two()
        || !block_n.is_power_of_two()
        || block_n < 64
        || layout.words_per_tile() * 32 != total
    {
        return None;
    }
    let n = total.trailing_zeros() as usize;
    let positions = layout.positions();
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
