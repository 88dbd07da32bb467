//! Synthetic masks, deterministic per seed: random tokens and block-sparse tiles, as
//! visibility predicates (the selftests' masks) and with the region summaries the masks
//! crate's packer skips whole tiles by (`fragmask attention --synthetic-mask`).

use std::ops::Range;
use std::sync::Arc;

use fragmask_masks::Region;

/// A `--synthetic-mask` spec, parsed and range-checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Synthetic {
    /// `random:P` (or `topk:F`): each element kept with probability P.
    Random(f64),
    /// `blocksparse:T:P`: each tile kept with probability T, then each element with P.
    BlockSparse(f64, f64),
}

/// A visibility predicate `(b, h, i, j)` over the mask's own extents.
pub type Predicate = Arc<dyn Fn(usize, usize, usize, usize) -> bool + Send + Sync>;

fn hash(seed: u64, b: usize, h: usize, i: usize, j: usize) -> f64 {
    let mut x = seed ^ (b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for v in [h as u64, i as u64, j as u64] {
        x = (x ^ v).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 31;
    }
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    // 53 bits: in [0, 1), so `hash < 1.0` always holds and `hash < 0.0` never does.
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Synthetic tiles are `SYNTHETIC_TILE x SYNTHETIC_TILE`.
const SYNTHETIC_TILE: usize = 128;

/// Whether `(b, h, i, j)` is visible in the synthetic mask `spec` drawn from `seed`.
pub fn synthetic_visible(
    spec: Synthetic,
    seed: u64,
    b: usize,
    h: usize,
    i: usize,
    j: usize,
) -> bool {
    match spec {
        Synthetic::Random(keep) => hash(seed, b, h, i, j) < keep,
        Synthetic::BlockSparse(tiles, inside) => {
            hash(
                seed,
                b,
                h,
                i / SYNTHETIC_TILE,
                j / SYNTHETIC_TILE + (1 << 20),
            ) < tiles
                && hash(seed + 1, b, h, i, j) < inside
        }
    }
}

/// What is known of a rectangle of a synthetic mask without hashing its elements.
pub fn synthetic_region(
    spec: Synthetic,
    seed: u64,
    (b, h): (usize, usize),
    rows: Range<usize>,
    cols: Range<usize>,
) -> Region {
    let by_probability = |p: f64| {
        if p <= 0.0 {
            Region::Empty
        } else if p >= 1.0 {
            Region::Full
        } else {
            Region::Unknown
        }
    };
    match spec {
        Synthetic::Random(keep) => by_probability(keep),
        Synthetic::BlockSparse(tiles, inside) => {
            let (m, n) = (rows.start / SYNTHETIC_TILE, cols.start / SYNTHETIC_TILE);
            let one_tile = rows.end.saturating_sub(1) / SYNTHETIC_TILE == m
                && cols.end.saturating_sub(1) / SYNTHETIC_TILE == n;
            if !one_tile {
                Region::Unknown
            } else if hash(seed, b, h, m, n + (1 << 20)) >= tiles {
                Region::Empty
            } else {
                by_probability(inside)
            }
        }
    }
}

/// Random tokens: each (i, j) kept with probability `keep` (`--synthetic-mask random:P`).
pub fn random_tokens(keep: f64, seed: u64) -> Predicate {
    Arc::new(move |b, h, i, j| synthetic_visible(Synthetic::Random(keep), seed, b, h, i, j))
}

/// Block-sparse: each 128 x 128 tile kept with probability `tiles`, then each element
/// inside a kept tile with probability `inside` (`--synthetic-mask blocksparse:T:P`).
pub fn block_sparse(tiles: f64, inside: f64, seed: u64) -> Predicate {
    Arc::new(move |b, h, i, j| {
        synthetic_visible(Synthetic::BlockSparse(tiles, inside), seed, b, h, i, j)
    })
}

/// 64-token block lists (write-up 002's block sparsity): each 64 x 64 block of the plane
/// kept whole with probability `keep`.
pub fn blocks64(keep: f64, seed: u64) -> Predicate {
    Arc::new(move |b, h, i, j| {
        synthetic_visible(Synthetic::Random(keep), seed, b, h, i / 64, j / 64)
    })
}
