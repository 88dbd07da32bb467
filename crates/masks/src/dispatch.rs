//! The order in which a kernel's CTAs take a mask's work tiles: longest first
//! (longest-processing-time-first list scheduling, so the long walks start early and the
//! short ones fill the last wave; docs/backward.md "Dispatch order", docs/architecture.md
//! "Row order of the tile lists"). One order per stored mask plane, from the lists' counts;
//! the GPU packer and transposer write the same orders (`fragmask_pack_row_order`,
//! `fragmask_pack_tile_order` in fragmask-kernels).

use alloc::vec::Vec;
use core::cmp::Reverse;

/// The backward's key tiles: per plane (`counts` is `[planes, n_blocks]`, the query tiles
/// of each transposed row, partial and full), by count, most first, ties by index.
pub fn tile_order(counts: &[i32], n_blocks: usize) -> Vec<i32> {
    order(counts, n_blocks, |plane, i| {
        (Reverse(plane[i as usize]), i as i64)
    })
}

/// The forward's row blocks: per plane (`counts` is `[planes, m_blocks]`, the key tiles
/// of each forward row, partial and full), by count, most first, ties from the last row
/// (the one-tile grid's order without counts: a causal walk's longest rows are its last).
pub fn row_order(counts: &[i32], m_blocks: usize) -> Vec<i32> {
    order(counts, m_blocks, |plane, i| {
        (Reverse(plane[i as usize]), -(i as i64))
    })
}

/// Whether `order` (per plane of `len`) is the forward grid's order without counts: every
/// plane from its last row block down.
pub fn is_last_row_first(order: &[i32], len: usize) -> bool {
    order.chunks(len.max(1)).all(|plane| {
        plane
            .iter()
            .enumerate()
            .all(|(r, &m)| m as usize + r + 1 == plane.len())
    })
}

/// Whether `order` (per plane of `len`) is the index order in every plane.
pub fn is_index_order(order: &[i32], len: usize) -> bool {
    order
        .chunks(len.max(1))
        .all(|plane| plane.iter().enumerate().all(|(r, &n)| n as usize == r))
}

fn order<K: Ord>(counts: &[i32], len: usize, key: impl Fn(&[i32], i32) -> K) -> Vec<i32> {
    let mut out = Vec::with_capacity(counts.len());
    for plane in counts.chunks(len.max(1)) {
        let mut idx: Vec<i32> = (0..plane.len() as i32).collect();
        idx.sort_by_key(|&i| key(plane, i));
        out.extend(idx);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn counts(planes: usize, n: usize, seed: u64) -> Vec<i32> {
        let mut x = seed;
        (0..planes * n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 7) as i32
            })
            .collect()
    }

    fn is_permutation_of_each_plane(order: &[i32], n: usize) -> bool {
        order.chunks(n).all(|o| {
            let mut seen = o.to_vec();
            seen.sort_unstable();
            seen == (0..n as i32).collect::<Vec<_>>()
        })
    }

    proptest! {
        #![proptest_config(crate::bits::proptest_ci::config(64))]

        #[test]
        fn tile_order_is_a_permutation_of_each_plane_by_non_increasing_count_ties_ascending(
            planes in 1usize..4, n in 1usize..40, seed in any::<u64>(),
        ) {
            let c = counts(planes, n, seed);
            let order = tile_order(&c, n);
            prop_assert_eq!(order.len(), c.len());
            prop_assert!(is_permutation_of_each_plane(&order, n));
            for (o, c) in order.chunks(n).zip(c.chunks(n)) {
                for w in o.windows(2) {
                    let (a, b) = (c[w[0] as usize], c[w[1] as usize]);
                    prop_assert!(a > b || (a == b && w[0] < w[1]));
                }
            }
        }

        #[test]
        fn row_order_is_a_permutation_of_each_plane_by_non_increasing_count_ties_descending(
            planes in 1usize..4, n in 1usize..40, seed in any::<u64>(),
        ) {
            let c = counts(planes, n, seed);
            let order = row_order(&c, n);
            prop_assert_eq!(order.len(), c.len());
            prop_assert!(is_permutation_of_each_plane(&order, n));
            for (o, c) in order.chunks(n).zip(c.chunks(n)) {
                for w in o.windows(2) {
                    let (a, b) = (c[w[0] as usize], c[w[1] as usize]);
                    prop_assert!(a > b || (a == b && w[0] > w[1]));
                }
            }
        }

        #[test]
        fn equal_counts_give_the_grids_own_orders(planes in 1usize..4, n in 1usize..40, v in 0i32..9) {
            let c = vec![v; planes * n];
            prop_assert!(is_last_row_first(&row_order(&c, n), n));
            prop_assert!(is_index_order(&tile_order(&c, n), n));
        }
    }
}
