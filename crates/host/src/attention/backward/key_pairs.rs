//! The step table of the paired-key-block backward (docs/backward.md, "Paired key
//! blocks"): a CTA's two consumer warpgroups each own one 64-key block of a 64 × 64 block
//! mask (write-up 002, VSA's 64-token blocks), and the CTA walks the union of the two key
//! blocks' transposed lists, so a query tile both lists hold is loaded (Q, dO) and
//! dQ-reduced once for both. Built on the host from the [`TransposedLists`]; read by the
//! kernel as int4 loads (layout: `family::schedule::key_tile::PAIRED_LISTS`).
//!
//! - **Pairs**: per plane, the key blocks are paired greedily by the query tiles their
//!   lists share ([`pair_blocks`], the forward's shared-K/V pairing, on the key blocks'
//!   rows); an odd block count leaves the last pair `(a, -1)`.
//! - **Order**: a plane's pairs by steps, most first (ties: smaller key block 0 first),
//!   since CTA `x` takes header `x`; a pair's steps ascend in query tile, one per query
//!   tile of the union, or, in the deterministic mode, take the walk order
//!   ([`fragmask_masks::PlaneWalker`], docs/backward.md "Walk orders"): each pair visits
//!   its query tiles by when the pairs launched before it are expected to leave them.
//! - **Turns**: each step carries the pair's rank among the plane's pairs before it (in
//!   that order) that visit its query tile, the deterministic mode's dQ turn: a pair waits
//!   only for pairs the grid launched before it.

use fragmask_masks::{PlaneWalker, TransposedLists};

use crate::attention::shared_kv::{greedy_window, pair_blocks};
use crate::attention::AttentionError;

/// Ints per pair header: key block of warpgroup 0, key block of warpgroup 1 (-1: none),
/// the int4 index of the pair's first step in the whole table, the number of steps.
pub const HEADER_INTS: usize = 4;
/// Ints per step: query tile `m`, warpgroup 0's tile, warpgroup 1's tile, the pair's turn
/// (module docs).
pub const STEP_INTS: usize = 4;
/// The warpgroup's key block holds the step's query tile as a full tile.
pub const FULL: i32 = crate::attention::shared_kv::FULL;
/// The warpgroup's key block does not see the step's query tile (it skips the step).
pub const NOT_MINE: i32 = -2;
/// Most ints a table may have (4 GiB); keeps every int4 index within `i32`.
pub const MAX_INTS: usize = 1 << 30;

/// The table of one call and what it walks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPairTable {
    /// `planes × pairs_per_plane` headers ([`HEADER_INTS`] each; pair `x` of plane `p` at
    /// int4 index `p × pairs_per_plane + x`), then the steps of every pair ([`STEP_INTS`]
    /// each). A warpgroup's tile is `>= 0` (partial: index into the transposed words),
    /// [`FULL`] or [`NOT_MINE`].
    pub ints: Vec<i32>,
    /// Mask planes (batch × heads of the mask).
    pub planes: usize,
    /// Pairs per plane: `ceil(n_blocks / 2)`.
    pub pairs_per_plane: usize,
    /// Steps of all pairs (the union walks).
    pub steps: usize,
    /// Entries of all key blocks' lists (the steps of one key block per CTA).
    pub list_steps: usize,
}

impl KeyPairTable {
    /// The union walks' steps over the lists' entries (1 when the lists are empty).
    pub fn load_ratio(&self) -> f64 {
        crate::attention::shared_kv::load_ratio(self.steps as u64, self.list_steps as u64)
    }
}

/// The order of each pair's steps ([`key_pair_table`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairWalks {
    /// Ascending in the query tile.
    Ascending,
    /// The walk order of a plane's pairs launched this many at a time, where that pays
    /// ([`walks_pay`]); ascending elsewhere.
    WherePays(usize),
    /// The walk order on every plane (pairs launched this many at a time).
    Always(usize),
}

/// The paired-key-block step table of `t` (module docs), each pair's steps in the order
/// `walks` says.
pub fn key_pair_table(
    t: &TransposedLists,
    walks: PairWalks,
) -> Result<KeyPairTable, AttentionError> {
    table_within(t, MAX_INTS, walks)
}

/// Whether a plane's pairs take the walk order: where their steps fill at most 60% of
/// (pairs x query tiles). Write-up 002's backward (N = 23296, H = 12, D = 128, 64-token
/// blocks; one H200, 2 interleaved rounds, `bench/results/session-2026-11-29l/call2/`),
/// walked over ascending at 5 / 10 / 20 / 30 / 50% of the blocks kept (fill about 0.10 /
/// 0.19 / 0.36 / 0.51 / 0.75): 0.671 / 0.722 / 0.840 / 0.947 / 1.060. Both sides of the
/// bound against this rule (`call5/`, 2 ABBA pairs): walks off at 30 / 35% (fill 0.51 /
/// 0.58) 1.060 / 1.020; walks on at 40 / 45 / 50 / 60% (fill 0.64 / 0.70 / 0.75 / 0.84)
/// 1.019 / 1.041 / 1.056 / 1.069. Where nearly every pair visits every query tile, the
/// ascending walks already pass the turns on in a wavefront.
pub fn walks_pay(plane_steps: usize, pairs: usize, m_blocks: usize) -> bool {
    (plane_steps as u128) * 5 <= (pairs as u128) * (m_blocks as u128) * 3
}

fn too_large(max_ints: usize) -> AttentionError {
    AttentionError::Mask(format!(
        "the paired key-block step table exceeds {max_ints} ints"
    ))
}

/// One key block's list: `(m, tile)` ascending in `m`, tile the partial offset or [`FULL`].
fn key_block_list(
    t: &TransposedLists,
    row: usize,
    m_blocks: usize,
) -> Result<Vec<(i32, i32)>, AttentionError> {
    let (partial, offsets, full) = t.lists().row(row);
    let bad = |what: String| AttentionError::Mask(format!("transposed list row {row}: {what}"));
    let tiles = t.partial_tiles();
    let outside = |&&tile: &&i32| usize::try_from(tile).map_or(true, |tile| tile >= tiles);
    if let Some(&tile) = offsets.iter().find(outside) {
        return Err(bad(format!("tile offset {tile} outside 0..{tiles}")));
    }
    let list = crate::attention::shared_kv::row_entries(partial, offsets, full);
    for (i, &(m, _)) in list.iter().enumerate() {
        if usize::try_from(m).map_or(true, |m| m >= m_blocks) {
            return Err(bad(format!("query tile {m} outside 0..{m_blocks}")));
        }
        if i > 0 && list[i - 1].0 == m {
            return Err(bad(format!("query tile {m} listed twice")));
        }
    }
    Ok(list)
}

/// The union walk of two lists: one step per distinct `m`, ascending.
fn union_steps(a: &[(i32, i32)], b: &[(i32, i32)]) -> Vec<[i32; STEP_INTS]> {
    let mut steps = Vec::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    loop {
        let step = match (a.get(i), b.get(j)) {
            (Some(&(ma, ta)), Some(&(mb, tb))) if ma == mb => {
                i += 1;
                j += 1;
                [ma, ta, tb, 0]
            }
            (Some(&(ma, ta)), Some(&(mb, _))) if ma < mb => {
                i += 1;
                [ma, ta, NOT_MINE, 0]
            }
            (Some(&(ma, ta)), None) => {
                i += 1;
                [ma, ta, NOT_MINE, 0]
            }
            (_, Some(&(mb, tb))) => {
                j += 1;
                [mb, NOT_MINE, tb, 0]
            }
            (None, None) => break,
        };
        steps.push(step);
    }
    steps
}

/// [`key_pair_table`] with at most `max_ints` ints (an error beyond).
fn table_within(
    t: &TransposedLists,
    max_ints: usize,
    walks: PairWalks,
) -> Result<KeyPairTable, AttentionError> {
    let max_ints = max_ints.min(MAX_INTS);
    let (m_blocks, n_blocks) = (t.grid().m_blocks, t.grid().n_blocks);
    let planes = t.lists().rows().checked_div(n_blocks).unwrap_or(0);
    let pairs_per_plane = n_blocks.div_ceil(2);
    let header_ints = planes
        .checked_mul(pairs_per_plane)
        .and_then(|h| h.checked_mul(HEADER_INTS))
        .filter(|&h| h <= max_ints)
        .ok_or_else(|| too_large(max_ints))?;
    let mut ints = Vec::new();
    ints.try_reserve_exact(header_ints)
        .map_err(|_| too_large(max_ints))?;
    ints.resize(header_ints, 0i32);
    let (mut steps_all, mut list_steps) = (0usize, 0usize);
    let window = greedy_window(planes, n_blocks, m_blocks);
    let int4 = |ints: usize| i32::try_from(ints / STEP_INTS).map_err(|_| too_large(max_ints));
    let block = |n: usize| i32::try_from(n).map_err(|_| too_large(max_ints));
    for plane in 0..planes {
        let first_row = plane
            .checked_mul(n_blocks)
            .ok_or_else(|| too_large(max_ints))?;
        let rows = (0..n_blocks)
            .map(|n| {
                let row = first_row
                    .checked_add(n)
                    .ok_or_else(|| too_large(max_ints))?;
                key_block_list(t, row, m_blocks)
            })
            .collect::<Result<Vec<_>, _>>()?;
        list_steps = rows
            .iter()
            .try_fold(list_steps, |sum, r| sum.checked_add(r.len()))
            .ok_or_else(|| too_large(max_ints))?;
        let mut pairs: Vec<(usize, Option<usize>, Vec<[i32; STEP_INTS]>)> =
            pair_blocks(&rows, m_blocks, window)
                .into_iter()
                .map(|(a, b)| {
                    let rows_b = b.and_then(|b| rows.get(b)).map_or(&[][..], Vec::as_slice);
                    let rows_a = rows.get(a).map_or(&[][..], Vec::as_slice);
                    (a, b, union_steps(rows_a, rows_b))
                })
                .collect();
        if pairs.len() != pairs_per_plane {
            return Err(AttentionError::Mask(format!(
                "plane {plane}: {} key-block pairs for {n_blocks} key blocks",
                pairs.len()
            )));
        }
        pairs.sort_by(|x, y| y.2.len().cmp(&x.2.len()).then(x.0.cmp(&y.0)));
        let plane_steps: usize = pairs.iter().map(|p| p.2.len()).sum();
        let walk_at_once = match walks {
            PairWalks::Ascending => None,
            PairWalks::WherePays(n) => walks_pay(plane_steps, pairs.len(), m_blocks).then_some(n),
            PairWalks::Always(n) => Some(n),
        };
        if let Some(at_once) = walk_at_once {
            let mut walker = PlaneWalker::new(m_blocks, plane_steps, pairs.len(), at_once);
            for (n, (_, _, steps)) in pairs.iter_mut().enumerate() {
                walker.walk(n, steps, |s| s[0] as usize);
            }
        }
        // The turns: per query tile, the pairs (in launch order) that visited it so far.
        let mut visitors = vec![0i32; m_blocks];
        for (_, _, steps) in &mut pairs {
            for step in steps.iter_mut() {
                // union_steps took m from lists key_block_list checked to be below m_blocks.
                let count = visitors.get_mut(step[0] as usize).ok_or_else(|| {
                    AttentionError::Mask(format!(
                        "a paired step's query tile {} is outside the {m_blocks} query tiles",
                        step[0]
                    ))
                })?;
                step[3] = *count;
                *count += 1;
            }
        }
        for (x, (a, b, steps)) in pairs.into_iter().enumerate() {
            let extra = steps
                .len()
                .checked_mul(STEP_INTS)
                .filter(|&e| ints.len().checked_add(e).is_some_and(|n| n <= max_ints))
                .ok_or_else(|| too_large(max_ints))?;
            let header = [
                block(a)?,
                b.map_or(Ok(-1), block)?,
                int4(ints.len())?,
                i32::try_from(steps.len()).map_err(|_| too_large(max_ints))?,
            ];
            let at = plane
                .checked_mul(pairs_per_plane)
                .and_then(|p| p.checked_add(x))
                .and_then(|h| h.checked_mul(HEADER_INTS))
                .ok_or_else(|| too_large(max_ints))?;
            ints.get_mut(at..)
                .and_then(|h| h.get_mut(..HEADER_INTS))
                .ok_or_else(|| too_large(max_ints))?
                .copy_from_slice(&header);
            ints.try_reserve(extra).map_err(|_| too_large(max_ints))?;
            ints.extend(steps.iter().flatten());
            steps_all = steps_all
                .checked_add(steps.len())
                .ok_or_else(|| too_large(max_ints))?;
        }
    }
    Ok(KeyPairTable {
        ints,
        planes,
        pairs_per_plane,
        steps: steps_all,
        list_steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::blockmask::{kernel_accumulator, FnMask};
    use fragmask_kernels::attention::Geometry;
    use fragmask_masks::{pack_transposed, Encoding, MaskShape, PackOptions, PackedMask, Region};
    use proptest::prelude::*;

    const EMPTY: u8 = 0;
    const WHOLE: u8 = 1;
    const PART: u8 = 2;

    /// A `[batch, heads, 64 m_blocks, 64 n_blocks]` mask packed with its transposed lists
    /// for the 64 × 64 tile; `class[(plane × m_blocks + m) × n_blocks + n]` is each tile's
    /// [`EMPTY`], [`WHOLE`] or [`PART`] (a checkerboard).
    fn packed(batch: usize, heads: usize, mb: usize, nb: usize, class: &[u8]) -> PackedMask {
        let shape = MaskShape::new(batch, heads, mb * 64, nb * 64).unwrap();
        let at = move |b: usize, h: usize, m: usize, n: usize| {
            class[((b * heads + h) * mb + m) * nb + n]
        };
        let visible = move |b, h, i: usize, j: usize| match at(b, h, i / 64, j / 64) {
            WHOLE => true,
            PART => (i + j) % 2 == 0,
            _ => false,
        };
        let region = move |b, h, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
            if rows.is_empty() || cols.is_empty() {
                return Region::Unknown;
            }
            let mut kinds = (rows.start / 64..rows.end.div_ceil(64))
                .flat_map(|m| (cols.start / 64..cols.end.div_ceil(64)).map(move |n| (m, n)))
                .map(|(m, n)| at(b, h, m, n));
            match kinds.next() {
                Some(EMPTY) if kinds.all(|k| k == EMPTY) => Region::Empty,
                Some(WHOLE) if kinds.all(|k| k == WHOLE) => Region::Full,
                _ => Region::Unknown,
            }
        };
        let acc = kernel_accumulator(&Geometry::TILE_64X64).unwrap();
        let backward = TransposedLists::default_accumulator(&acc).unwrap();
        let source = FnMask::with_region(shape, visible, region);
        pack_transposed(
            &source,
            &acc,
            Encoding::FragmentNative,
            &backward,
            &PackOptions::default(),
        )
        .unwrap()
    }

    /// Small random masks: 1 to 4 planes, 1 to 20 tiles each way (odd `n_blocks` too),
    /// mostly empty tiles, some key tiles with no query tile at all.
    fn masks() -> impl Strategy<Value = PackedMask> {
        (1usize..=2, 1usize..=2, 1usize..=20, 1usize..=20)
            .prop_flat_map(|(b, h, mb, nb)| {
                let class = prop_oneof![3 => Just(EMPTY), 1 => Just(WHOLE), 1 => Just(PART)];
                let tiles = b * h * mb * nb;
                (
                    Just((b, h, mb, nb)),
                    proptest::collection::vec(class, tiles),
                    proptest::collection::vec(proptest::bool::weighted(0.2), nb),
                )
            })
            .prop_map(|((b, h, mb, nb), mut class, empty_key_tiles)| {
                for (i, c) in class.iter_mut().enumerate() {
                    if empty_key_tiles[i % nb] {
                        *c = EMPTY;
                    }
                }
                packed(b, h, mb, nb, &class)
            })
    }

    /// The headers of `table` per plane: `(kb0, kb1, first, steps)`.
    fn headers(table: &KeyPairTable) -> Vec<Vec<(i32, i32, usize, usize)>> {
        table.ints[..table.planes * table.pairs_per_plane * HEADER_INTS]
            .chunks(HEADER_INTS)
            .map(|h| (h[0], h[1], h[2] as usize, h[3] as usize))
            .collect::<Vec<_>>()
            .chunks(table.pairs_per_plane.max(1))
            .map(<[_]>::to_vec)
            .collect()
    }

    /// The steps of one header.
    fn steps_of(table: &KeyPairTable, first: usize, count: usize) -> &[i32] {
        &table.ints[first * STEP_INTS..(first + count) * STEP_INTS]
    }

    /// Key tile `n` of `plane`'s list from the transposed lists: `(m, tile)` ascending.
    fn list(t: &TransposedLists, plane: usize, n: usize) -> Vec<(i32, i32)> {
        let (partial, offsets, full) = t.lists().row(plane * t.grid().n_blocks + n);
        let mut l: Vec<(i32, i32)> = partial
            .iter()
            .copied()
            .zip(offsets.iter().copied())
            .collect();
        l.extend(full.iter().map(|&m| (m, FULL)));
        l.sort_unstable();
        l
    }

    proptest! {
        #![proptest_config(crate::attention::proptest_ci::config(128))]

        #[test]
        fn every_key_tile_of_every_plane_is_in_exactly_one_pair(mask in masks()) {
            let t = mask.transposed().unwrap();
            let table = key_pair_table(t, PairWalks::Ascending).unwrap();
            let nb = t.grid().n_blocks;
            prop_assert_eq!(table.planes, t.lists().rows() / nb);
            prop_assert_eq!(table.pairs_per_plane, nb.div_ceil(2));
            for (plane, pairs) in headers(&table).iter().enumerate() {
                let mut seen: Vec<i32> = pairs.iter().flat_map(|p| [p.0, p.1]).filter(|&n| n >= 0).collect();
                seen.sort_unstable();
                prop_assert_eq!(seen, (0..nb as i32).collect::<Vec<_>>(), "plane {}", plane);
                let alone = pairs.iter().filter(|p| p.1 == -1).count();
                prop_assert_eq!(alone, nb % 2, "plane {}", plane);
                prop_assert!(pairs.iter().all(|p| p.0 >= 0 && p.1 >= -1 && p.0 != p.1));
            }
        }

        #[test]
        fn headers_point_at_disjoint_step_ranges_that_tile_the_step_region(mask in masks()) {
            let table = key_pair_table(mask.transposed().unwrap(), PairWalks::Ascending).unwrap();
            let first_step = table.planes * table.pairs_per_plane;
            prop_assert_eq!(table.ints.len(), (first_step + table.steps) * 4);
            let mut next = first_step;
            for pairs in headers(&table) {
                for (_, _, first, count) in pairs {
                    prop_assert_eq!(first, next);
                    next += count;
                }
            }
            prop_assert_eq!(next, first_step + table.steps);
        }

        #[test]
        fn each_warpgroup_s_steps_are_exactly_its_key_tile_s_transposed_list(mask in masks()) {
            let t = mask.transposed().unwrap();
            let table = key_pair_table(t, PairWalks::Ascending).unwrap();
            for (plane, pairs) in headers(&table).iter().enumerate() {
                for &(kb0, kb1, first, count) in pairs {
                    let steps = steps_of(&table, first, count);
                    for (w, kb) in [kb0, kb1].into_iter().enumerate() {
                        let got: Vec<(i32, i32)> = steps
                            .chunks(STEP_INTS)
                            .filter(|s| s[1 + w] != NOT_MINE)
                            .map(|s| (s[0], s[1 + w]))
                            .collect();
                        let want = if kb < 0 { Vec::new() } else { list(t, plane, kb as usize) };
                        prop_assert_eq!(got, want, "plane {} key tile {} (warpgroup {})", plane, kb, w);
                    }
                }
            }
        }

        #[test]
        fn steps_ascend_in_m_and_every_step_has_a_member(mask in masks()) {
            let t = mask.transposed().unwrap();
            let table = key_pair_table(t, PairWalks::Ascending).unwrap();
            let mb = t.grid().m_blocks as i32;
            for pairs in headers(&table) {
                for (_, _, first, count) in pairs {
                    let steps = steps_of(&table, first, count);
                    for s in steps.chunks(STEP_INTS) {
                        prop_assert!((0..mb).contains(&s[0]), "query tile {}", s[0]);
                        prop_assert!(s[1] != NOT_MINE || s[2] != NOT_MINE, "step {:?}", s);
                        prop_assert!(s[1] >= NOT_MINE && s[2] >= NOT_MINE && s[3] >= 0, "step {:?}", s);
                    }
                    for w in steps.chunks(STEP_INTS).collect::<Vec<_>>().windows(2) {
                        prop_assert!(w[0][0] < w[1][0], "{:?} before {:?}", w[0], w[1]);
                    }
                }
            }
        }

        #[test]
        fn each_query_tile_s_visitors_take_turns_0_1_2_in_launch_order(
            mask in masks(), walk in prop_oneof![
                Just(PairWalks::Ascending),
                (1usize..6).prop_map(PairWalks::WherePays),
                (1usize..6).prop_map(PairWalks::Always),
            ],
        ) {
            let t = mask.transposed().unwrap();
            let table = key_pair_table(t, walk).unwrap();
            let mb = t.grid().m_blocks;
            for pairs in headers(&table) {
                // Pair x's turn at m is the number of pairs before it (in x order) visiting m.
                let mut next = vec![0i32; mb];
                for (_, _, first, count) in pairs {
                    for s in steps_of(&table, first, count).chunks(STEP_INTS) {
                        prop_assert_eq!(s[3], next[s[0] as usize], "step {:?}", s);
                        next[s[0] as usize] += 1;
                    }
                }
            }
        }

        #[test]
        fn walked_pairs_hold_the_ascending_steps_unvisited_query_tiles_first_where_they_walk(
            mask in masks(), at_once in 1usize..6, always in any::<bool>(),
        ) {
            let t = mask.transposed().unwrap();
            let walks = if always { PairWalks::Always(at_once) } else { PairWalks::WherePays(at_once) };
            let (plain, walked) = (key_pair_table(t, PairWalks::Ascending).unwrap(), key_pair_table(t, walks).unwrap());
            prop_assert_eq!(&walked.ints[..walked.planes * walked.pairs_per_plane * HEADER_INTS],
                &plain.ints[..plain.planes * plain.pairs_per_plane * HEADER_INTS]);
            for pairs in headers(&walked) {
                let mut visited = vec![false; t.grid().m_blocks];
                let plane_steps = pairs.iter().map(|p| p.3).sum();
                let walks = always || walks_pay(plane_steps, pairs.len(), t.grid().m_blocks);
                for (_, _, first, count) in pairs {
                    let steps: Vec<&[i32]> = steps_of(&walked, first, count).chunks(STEP_INTS).collect();
                    let mut sorted = steps.clone();
                    sorted.sort_unstable();
                    let ascending: Vec<&[i32]> = steps_of(&plain, first, count).chunks(STEP_INTS).collect();
                    // The same steps, turns included (a turn counts the pairs launched before).
                    prop_assert_eq!(&sorted, &ascending);
                    if !walks {
                        prop_assert_eq!(&steps, &ascending, "a plane above the fill ascends");
                    }
                    let new = steps.iter().take_while(|s| !visited[s[0] as usize]).count();
                    prop_assert!(!walks || steps[new..].iter().all(|s| visited[s[0] as usize]), "{:?}", steps);
                    for s in steps {
                        visited[s[0] as usize] = true;
                    }
                }
            }
        }

        #[test]
        fn pairs_of_a_plane_run_longest_first(mask in masks()) {
            let table = key_pair_table(mask.transposed().unwrap(), PairWalks::Ascending).unwrap();
            for pairs in headers(&table) {
                for w in pairs.windows(2) {
                    let (a, b) = (w[0], w[1]);
                    prop_assert!(a.3 > b.3 || (a.3 == b.3 && a.0 < b.0), "{:?} before {:?}", a, b);
                }
            }
        }

        #[test]
        fn the_union_never_has_more_steps_than_the_lists(mask in masks()) {
            let t = mask.transposed().unwrap();
            let table = key_pair_table(t, PairWalks::Ascending).unwrap();
            let ms = |plane: usize, kb: i32| -> Vec<i32> {
                if kb < 0 { Vec::new() } else { list(t, plane, kb as usize).iter().map(|e| e.0).collect() }
            };
            let (mut list_steps, mut steps) = (0, 0);
            for (plane, pairs) in headers(&table).iter().enumerate() {
                for &(kb0, kb1, _, count) in pairs {
                    let (m0, m1) = (ms(plane, kb0), ms(plane, kb1));
                    let (l0, l1) = (m0.len(), m1.len());
                    prop_assert!(l0.max(l1) <= count && count <= l0 + l1, "{} vs {} + {}", count, l0, l1);
                    let mut union: Vec<i32> = m0.into_iter().chain(m1).collect();
                    union.sort_unstable();
                    union.dedup();
                    prop_assert_eq!(count, union.len(), "one step per query tile of the union");
                    list_steps += l0 + l1;
                    steps += count;
                }
            }
            prop_assert_eq!((table.list_steps, table.steps), (list_steps, steps));
            prop_assert!(table.steps <= table.list_steps);
            prop_assert!(table.load_ratio() <= 1.0 && table.load_ratio() > 0.0);
        }
    }

    /// Two heads of 3 × 3 tiles (`.` empty, `F` full, `P` partial; rows are query tiles):
    ///
    /// ```text
    /// head 0: key 0 1 2    head 1: key 0 1 2
    ///   m 0     P . F        m 0     . . F
    ///   m 1     F . P        m 1     . . .
    ///   m 2     . . P        m 2     . . F
    /// ```
    fn example() -> PackedMask {
        #[rustfmt::skip]
        let class = [
            PART, EMPTY, WHOLE,
            WHOLE, EMPTY, PART,
            EMPTY, EMPTY, PART,
            EMPTY, EMPTY, WHOLE,
            EMPTY, EMPTY, EMPTY,
            EMPTY, EMPTY, WHOLE,
        ];
        packed(1, 2, 3, 3, &class)
    }

    #[test]
    fn pairs_walk_up_to_a_fill_of_three_fifths() {
        // 10 pairs over 20 query tiles: 200 slots, 120 of them is the bound.
        assert!(walks_pay(120, 10, 20));
        assert!(!walks_pay(121, 10, 20));
        assert!(walks_pay(0, 0, 0));
        assert!(!walks_pay(1, 0, 20));
        assert!(!walks_pay(usize::MAX, usize::MAX, 1));
    }

    #[test]
    fn a_hand_made_mask_gives_the_exact_table() {
        let mask = example();
        let table = key_pair_table(mask.transposed().unwrap(), PairWalks::Ascending).unwrap();
        // Head 0 pairs key tiles 0 and 2 (they share query tiles 0 and 1), key tile 1 is
        // alone; head 1 pairs the neighbours 0 and 1 (nothing shared anywhere) and puts
        // key tile 2's pair first (2 steps against 0). Partial offsets number the
        // transposed words in (head, key tile, query tile) order.
        #[rustfmt::skip]
        let want = vec![
            // Headers (int4 0..4).
            0, 2, 4, 3,
            1, -1, 7, 0,
            2, -1, 7, 2,
            0, 1, 9, 0,
            // Head 0, pair (0, 2).
            0, 0, FULL, 0,
            1, FULL, 1, 0,
            2, NOT_MINE, 2, 0,
            // Head 1, pair (2, -1).
            0, FULL, NOT_MINE, 0,
            2, FULL, NOT_MINE, 0,
        ];
        assert_eq!(table.ints, want);
        assert_eq!(
            (
                table.planes,
                table.pairs_per_plane,
                table.steps,
                table.list_steps
            ),
            (2, 2, 5, 7)
        );
        assert!((table.load_ratio() - 5.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn a_table_over_the_int_limit_is_an_error_not_a_panic() {
        let mask = example();
        let t = mask.transposed().unwrap();
        assert_eq!(
            table_within(t, 36, PairWalks::Ascending)
                .unwrap()
                .ints
                .len(),
            36
        );
        for limit in [0, 15, 16, 35] {
            let e = table_within(t, limit, PairWalks::Ascending).unwrap_err();
            assert!(matches!(e, AttentionError::Mask(_)), "{e}");
        }
    }
}
