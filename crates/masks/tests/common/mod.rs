//! Shared test helpers: tile configurations, random masks, the reference classifier.
#![allow(dead_code)]

use fragmask_masks::{MaskSource, TiledAccumulator};
use proptest::prelude::*;

/// `(block_m, block_n, warpgroups, swap_ab)`: warpgroups 1..3, SwapAB, power-of-two
/// tiles (bit-permutation path) and others (scatter path, padding bits).
pub const CONFIGS: &[(u32, u32, u32, bool)] = &[
    (128, 128, 2, false),
    (64, 64, 1, false),
    (64, 32, 1, false),
    (128, 96, 1, false),
    (192, 128, 3, false),
    (256, 128, 2, false),
    (128, 128, 2, true),
    (64, 128, 2, true),
    (128, 64, 1, true),
    (96, 192, 3, true),
];

pub fn acc(i: usize) -> TiledAccumulator {
    let (m, n, w, s) = CONFIGS[i];
    TiledAccumulator::new(m, n, w, s).unwrap()
}

pub fn config() -> impl Strategy<Value = usize> {
    0..CONFIGS.len()
}

/// A dense mask `[b, h, sq, sk]` built tile by tile (tiles of `bm × bn`), each tile
/// empty, full, random at some density, or a diagonal, so that every tile class and
/// the ragged edges occur.
#[derive(Clone, Debug)]
pub struct RandomMask {
    pub batch: usize,
    pub heads: usize,
    pub seqlen_q: usize,
    pub seqlen_k: usize,
    pub data: Vec<u8>,
}

impl RandomMask {
    pub fn dims(&self) -> Vec<usize> {
        vec![self.batch, self.heads, self.seqlen_q, self.seqlen_k]
    }
    pub fn at(&self, b: usize, h: usize, q: usize, k: usize) -> bool {
        self.data[((b * self.heads + h) * self.seqlen_q + q) * self.seqlen_k + k] != 0
    }
}

/// Small deterministic generator (splitmix64).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn random_mask(
    seed: u64,
    batch: usize,
    heads: usize,
    sq: usize,
    sk: usize,
    bm: usize,
    bn: usize,
) -> RandomMask {
    let mut rng = Rng(seed);
    let mut data = vec![0u8; batch * heads * sq * sk];
    let (mb, nb) = (sq.div_ceil(bm), sk.div_ceil(bn));
    for bh in 0..batch * heads {
        for m in 0..mb {
            for n in 0..nb {
                let kind = rng.below(6);
                let density = rng.below(1001);
                for r in m * bm..((m + 1) * bm).min(sq) {
                    for c in n * bn..((n + 1) * bn).min(sk) {
                        let bit = match kind {
                            0 => false,
                            1 => true,
                            2 => r >= c,
                            3 => rng.below(1000) == 0,
                            _ => rng.below(1000) < density,
                        };
                        // Values other than 1 also mean true.
                        data[(bh * sq + r) * sk + c] = if bit {
                            1 + (rng.below(4) == 0) as u8 * 6
                        } else {
                            0
                        };
                    }
                }
            }
        }
    }
    RandomMask {
        batch,
        heads,
        seqlen_q: sq,
        seqlen_k: sk,
        data,
    }
}

/// Dense bytes of any source (`[B, H, Sq, Sk]`, 0/1), element by element.
pub fn densify(source: &dyn MaskSource) -> RandomMask {
    let s = source.shape();
    let mut data = Vec::with_capacity(s.batch * s.heads * s.seqlen_q * s.seqlen_k);
    for b in 0..s.batch {
        for h in 0..s.heads {
            for q in 0..s.seqlen_q {
                let mut row = vec![0u64; s.seqlen_k.div_ceil(64)];
                source.row_bits(b, h, q, 0, s.seqlen_k, &mut row);
                data.extend((0..s.seqlen_k).map(|k| ((row[k / 64] >> (k % 64)) & 1) as u8));
            }
        }
    }
    RandomMask {
        batch: s.batch,
        heads: s.heads,
        seqlen_q: s.seqlen_q,
        seqlen_k: s.seqlen_k,
        data,
    }
}

/// Reference classification of one tile from the dense mask: 0 empty, 1 full, 2 partial.
pub fn reference_class(
    mask: &RandomMask,
    b: usize,
    h: usize,
    m: usize,
    n: usize,
    bm: usize,
    bn: usize,
) -> u8 {
    let mut ones = 0usize;
    for r in m * bm..(m + 1) * bm {
        for c in n * bn..(n + 1) * bn {
            if r < mask.seqlen_q && c < mask.seqlen_k && mask.at(b, h, r, c) {
                ones += 1;
            }
        }
    }
    match ones {
        0 => 0,
        x if x == bm * bn => 1,
        _ => 2,
    }
}
