//! The step table of the shared-K/V tile ([`Geometry::TILE_64X64_SHARED`]): which two
//! 64-row query blocks of a plane share a CTA, and the union walk of their key-block
//! lists that the CTA's producer loads once for both (docs/architecture.md, "Shared K/V
//! of the 64-token tile"). Built once per plan from the packed mask's host lists and
//! uploaded as `AttentionParams::pair_steps` (layout: `family::schedule::row_block::SHARED_LISTS`).
//!
//! - **Pairs**: in each plane, query block `a` (in order) takes the unpaired block `b`
//!   whose list shares the most key blocks with its own (greedy matching on bitsets), so
//!   the CTA loads each shared block once. It looks at the next `window` unpaired blocks
//!   only, the window set so a call spends at most [`GREEDY_MAX_WORK`] bit-word
//!   operations (every block at write-up 002's 364 blocks per plane).
//! - **Steps**: two key blocks per step. The blocks both lists hold pair up among
//!   themselves (both warpgroups compute the step), and so do the blocks of one list only
//!   (the other warpgroup skips the step), so a warpgroup rarely computes half a step; the
//!   three kinds of step take turns, [`STEP_RUN`] steps each (both, a only, b only, ...),
//!   so that each warpgroup has work within the stages in flight. The at most three blocks
//!   left over share the last steps.

use fragmask_kernels::attention::Geometry;
use fragmask_masks::PackedMask;

use super::AttentionError;

/// Ints per step of the table: key block of slot 0 and 1, then each warpgroup's mask tile
/// of each slot, two ints of padding (two 16-byte loads).
pub const STEP_INTS: usize = 8;
/// Ints per pair header: the two query blocks, the int offset of the first step, the steps.
pub const HEADER_INTS: usize = 4;
/// A slot that is not in the warpgroup's list (the kernel's `FM_NOT_MINE`).
pub const NOT_MINE: i32 = -2;
/// A full block of the warpgroup's list (no words).
pub const FULL: i32 = -1;
/// Most 64-bit word operations the greedy pairing of one call spends (`planes ×
/// m_blocks × window × words per row`; about 30 ms).
pub const GREEDY_MAX_WORK: usize = 1 << 25;

/// Candidates each query block compares ([`pair_blocks`]'s `window`) so that `planes`
/// planes of `m_blocks` rows of `n_blocks` key blocks stay within [`GREEDY_MAX_WORK`]
/// (at least 1: neighbours).
pub fn greedy_window(planes: usize, m_blocks: usize, n_blocks: usize) -> usize {
    let per_candidate = planes
        .saturating_mul(m_blocks)
        .saturating_mul(n_blocks.div_ceil(64).max(1))
        .max(1);
    (GREEDY_MAX_WORK / per_candidate).max(1)
}

/// One list row's blocks: the key block and its mask tile (>= 0 partial, [`FULL`]).
fn row_blocks(mask: &PackedMask, row: usize) -> Vec<(i32, i32)> {
    let (partial, offsets, full) = mask.lists().row(row);
    row_entries(partial, offsets, full)
}

/// One list row (`BlockLists::row`: partial blocks, their tiles, full blocks) as
/// `(block, tile)` pairs in block order, a full block's tile [`FULL`] (both directions'
/// lists; the backward's key pairs read the transposed ones).
pub(crate) fn row_entries(partial: &[i32], offsets: &[i32], full: &[i32]) -> Vec<(i32, i32)> {
    let mut blocks: Vec<(i32, i32)> = partial
        .iter()
        .zip(offsets)
        .map(|(&n, &t)| (n, t))
        .chain(full.iter().map(|&n| (n, FULL)))
        .collect();
    blocks.sort_unstable();
    blocks
}

/// The pairs of a plane's `rows` lists (query blocks `0..rows.len()`): `(a, b)` with
/// `b = None` for a block left alone (an odd count). Each block `a`, in order, takes the
/// one of the next `window` unpaired blocks that shares the most key blocks with it (the
/// nearest on a tie; `window` 1 pairs neighbours).
pub fn pair_blocks(
    rows: &[Vec<(i32, i32)>],
    n_blocks: usize,
    window: usize,
) -> Vec<(usize, Option<usize>)> {
    let m = rows.len();
    let words = n_blocks.div_ceil(64).max(1);
    let bits: Vec<Vec<u64>> = rows
        .iter()
        .map(|r| {
            let mut b = vec![0u64; words];
            for &(n, _) in r {
                if let Ok(n) = usize::try_from(n) {
                    if n < n_blocks {
                        b[n / 64] |= 1 << (n % 64);
                    }
                }
            }
            b
        })
        .collect();
    let mut paired = vec![false; m];
    let mut pairs = Vec::with_capacity(m.div_ceil(2));
    for a in 0..m {
        if paired[a] {
            continue;
        }
        paired[a] = true;
        // The unpaired block sharing most blocks with a; ties go to the nearest.
        let mut best: Option<(u32, usize)> = None;
        let candidates = paired
            .iter()
            .enumerate()
            .skip(a + 1)
            .filter(|(_, done)| !**done)
            .take(window.max(1));
        for (b, _) in candidates {
            let shared: u32 = bits[a]
                .iter()
                .zip(&bits[b])
                .map(|(x, y)| (x & y).count_ones())
                .sum();
            if best.is_none_or(|(s, _)| shared > s) {
                best = Some((shared, b));
            }
        }
        let b = best.map(|(_, b)| b);
        if let Some(b) = b {
            paired[b] = true;
        }
        pairs.push((a, b));
    }
    pairs
}

/// Steps of one kind each turn of [`pair_steps`] takes (see [`pair_steps_in_runs`]): two
/// give a warpgroup consecutive steps, so its overlapped loop has a PV beside the next QKᵀ
/// (write-up 002 at 50% of blocks 0.952 of one step per turn, 10% 0.996; H100,
/// bench/results/vsao-2026-11-27/).
pub const STEP_RUN: usize = 2;

/// The steps of one pair (`a`'s and `b`'s sorted blocks with their mask tiles), each
/// `[n0, n1, a0, a1, b0, b1, 0, 0]` ([`STEP_INTS`]), in runs of [`STEP_RUN`].
pub fn pair_steps(a: &[(i32, i32)], b: &[(i32, i32)]) -> Vec<[i32; STEP_INTS]> {
    pair_steps_in_runs(a, b, STEP_RUN)
}

/// [`pair_steps`] with the kinds taking turns `run` steps at a time (at least 1): both,
/// ..., a only, ..., b only, ..., both, ... A kind whose blocks run out leaves the turn to
/// the others; the at most three blocks left over (one per kind) share the last steps.
pub fn pair_steps_in_runs(a: &[(i32, i32)], b: &[(i32, i32)], run: usize) -> Vec<[i32; STEP_INTS]> {
    // (key block, a's tile, b's tile) of the three kinds.
    let (mut both, mut only_a, mut only_b) = (Vec::new(), Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(&(na, ta)), Some(&(nb, tb))) if na == nb => {
                both.push((na, ta, tb));
                i += 1;
                j += 1;
            }
            (Some(&(na, ta)), Some(&(nb, _))) if na < nb => {
                only_a.push((na, ta, NOT_MINE));
                i += 1;
            }
            (Some(&(na, ta)), None) => {
                only_a.push((na, ta, NOT_MINE));
                i += 1;
            }
            (_, Some(&(nb, tb))) => {
                only_b.push((nb, NOT_MINE, tb));
                j += 1;
            }
            (None, None) => break,
        }
    }
    let step = |x: (i32, i32, i32), y: Option<(i32, i32, i32)>| {
        let (n1, a1, b1) = y.unwrap_or((-1, NOT_MINE, NOT_MINE));
        [x.0, n1, x.1, a1, x.2, b1, 0, 0]
    };
    let mut queues = [both, only_a, only_b].map(|q| q.into_iter().peekable());
    let mut steps = Vec::new();
    let mut left = Vec::new();
    loop {
        let mut any = false;
        for q in queues.iter_mut() {
            for _ in 0..run.max(1) {
                match (q.next(), q.peek().copied()) {
                    (Some(x), Some(_)) => {
                        let y = q.next();
                        steps.push(step(x, y));
                        any = true;
                    }
                    (Some(x), None) => {
                        left.push(x);
                        break;
                    }
                    (None, _) => break,
                }
            }
        }
        if !any {
            break;
        }
    }
    let mut rest = left.into_iter();
    while let Some(x) = rest.next() {
        steps.push(step(x, rest.next()));
    }
    steps
}

/// A call's step table and what it loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairTable {
    /// `AttentionParams::pair_steps`: `[planes × m_blocks]` int4 headers, row
    /// `plane × m_blocks + pair` for `pair < ceil(m_blocks / 2)` (the kernel's
    /// `batch · mask_batch_stride + head · mask_head_stride + pair`; the other rows stay
    /// 0), then the steps. `m_blocks`: the mask's 64-row blocks per plane.
    pub ints: Vec<i32>,
    /// K/V blocks the pairs load (the union of each pair's lists).
    pub loads: u64,
    /// K/V blocks the one-block tile loads (every list entry).
    pub own_loads: u64,
}

impl PairTable {
    /// The pairs' loads over the one-block tile's (1 for a mask with no entries).
    pub fn load_ratio(&self) -> f64 {
        load_ratio(self.loads, self.own_loads)
    }
}

/// What a pairing loads over what the unpaired blocks load (1 when they load nothing).
pub(crate) fn load_ratio(paired: u64, own: u64) -> f64 {
    if own == 0 {
        1.0
    } else {
        paired as f64 / own as f64
    }
}

/// The shared-K/V table of a mask packed at the one-block 64-token tile (one warpgroup,
/// 64x64: the masks [`Geometry::TILE_64X64`] reads), or `None` for a mask of another tile;
/// what `fragmask inspect` and Python's `Mask.shared_kv_load_ratio` report.
pub fn table_of_64_token_mask(mask: &PackedMask) -> Result<Option<PairTable>, AttentionError> {
    let acc = mask.accumulator();
    if (acc.block_m(), acc.block_n(), acc.warpgroups()) != (64, 64, 1) {
        return Ok(None);
    }
    table(mask, &Geometry::TILE_64X64_SHARED).map(Some)
}

/// The step table of `mask` for `geometry` (a shared-K/V one).
pub fn table(mask: &PackedMask, geometry: &Geometry) -> Result<PairTable, AttentionError> {
    if !geometry.shared_kv() {
        return Err(AttentionError::Shape(format!(
            "the {} tile has no shared-K/V step table",
            geometry.name()
        )));
    }
    let grid = mask.grid();
    let (m_blocks, n_blocks) = (grid.m_blocks, grid.n_blocks);
    let planes = mask.lists().rows() / m_blocks.max(1);
    let too_large = || AttentionError::Shape("the shared-K/V step table exceeds 2^31 ints".into());
    let headers = planes
        .checked_mul(m_blocks)
        .and_then(|r| r.checked_mul(HEADER_INTS))
        .ok_or_else(too_large)?;
    let mut out = vec![0i32; headers];
    let (mut loads, mut own_loads) = (0u64, 0u64);
    let window = greedy_window(planes, m_blocks, n_blocks);
    for plane in 0..planes {
        let rows: Vec<Vec<(i32, i32)>> = (0..m_blocks)
            .map(|m| row_blocks(mask, plane * m_blocks + m))
            .collect();
        for (pair, (a, b)) in pair_blocks(&rows, n_blocks, window).into_iter().enumerate() {
            let rows_b = b.map_or(&[][..], |b| &rows[b]);
            let steps = pair_steps(&rows[a], rows_b);
            own_loads += (rows[a].len() + rows_b.len()) as u64;
            loads += steps.iter().map(|s| 1 + u64::from(s[1] >= 0)).sum::<u64>();
            let header = (plane * m_blocks + pair) * HEADER_INTS;
            let first = i32::try_from(out.len()).map_err(|_| too_large())?;
            let count = i32::try_from(steps.len()).map_err(|_| too_large())?;
            let block = |m: usize| i32::try_from(m).map_err(|_| too_large());
            out[header..header + HEADER_INTS].copy_from_slice(&[
                block(a)?,
                b.map_or(Ok(-1), block)?,
                first,
                count,
            ]);
            out.extend(steps.iter().flatten());
        }
    }
    i32::try_from(out.len()).map_err(|_| too_large())?;
    Ok(PairTable {
        ints: out,
        loads,
        own_loads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn list(blocks: &[i32], tile0: i32) -> Vec<(i32, i32)> {
        blocks
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, if i % 3 == 0 { tile0 + i as i32 } else { FULL }))
            .collect()
    }

    fn sorted_unique(max: i32) -> impl Strategy<Value = Vec<i32>> {
        proptest::collection::btree_set(0..max, 0..40).prop_map(|s| s.into_iter().collect())
    }

    proptest! {
        #![proptest_config(super::super::proptest_ci::config(256))]

        /// Every block of either list is loaded once, and each warpgroup computes exactly
        /// its own list's blocks with their own mask tiles.
        #[test]
        fn steps_load_the_union_once_and_each_warpgroup_computes_its_own_list(
            a in sorted_unique(120), b in sorted_unique(120)
        ) {
            let (la, lb) = (list(&a, 0), list(&b, 1000));
            let steps = pair_steps(&la, &lb);
            let mut loaded = Vec::new();
            let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
            for s in &steps {
                for h in 0..2 {
                    let n = s[h];
                    if n < 0 {
                        prop_assert_eq!((s[2 + h], s[4 + h]), (NOT_MINE, NOT_MINE));
                        continue;
                    }
                    loaded.push(n);
                    if s[2 + h] != NOT_MINE { got_a.push((n, s[2 + h])); }
                    if s[4 + h] != NOT_MINE { got_b.push((n, s[4 + h])); }
                }
                prop_assert!(s[0] >= 0, "slot 0 always holds a block");
            }
            loaded.sort_unstable();
            let mut union: Vec<i32> = a.iter().chain(&b).copied().collect();
            union.sort_unstable();
            union.dedup();
            prop_assert_eq!(loaded, union);
            got_a.sort_unstable();
            got_b.sort_unstable();
            prop_assert_eq!(got_a, la);
            prop_assert_eq!(got_b, lb);
        }

        /// At most two steps hold blocks of two kinds (a warpgroup computing half of one).
        #[test]
        fn at_most_two_steps_mix_kinds(a in sorted_unique(120), b in sorted_unique(120)) {
            let steps = pair_steps(&list(&a, 0), &list(&b, 0));
            let kind = |s: &[i32; STEP_INTS], h: usize| (s[2 + h] != NOT_MINE, s[4 + h] != NOT_MINE);
            let mixed = steps.iter().filter(|s| s[1] < 0 || kind(s, 0) != kind(s, 1)).count();
            prop_assert!(mixed <= 2, "{mixed} mixed steps");
        }

        /// With `run` steps per turn, every list entry is in exactly one step, and each
        /// kind's runs of consecutive steps (the steps of one list or both, at most two
        /// mixed steps aside) are `run` long, but for the kind's last run.
        #[test]
        fn steps_of_a_kind_come_in_runs_of_the_given_length(
            a in sorted_unique(120), b in sorted_unique(120), run in 1usize..5
        ) {
            let (la, lb) = (list(&a, 0), list(&b, 1000));
            let steps = pair_steps_in_runs(&la, &lb, run);
            let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
            for s in &steps {
                for h in 0..2 {
                    if s[2 + h] != NOT_MINE { got_a.push((s[h], s[2 + h])); }
                    if s[4 + h] != NOT_MINE { got_b.push((s[h], s[4 + h])); }
                }
            }
            got_a.sort_unstable();
            got_b.sort_unstable();
            prop_assert_eq!(got_a, la);
            prop_assert_eq!(got_b, lb);
            let kind = |s: &[i32; STEP_INTS], h: usize| (s[2 + h] != NOT_MINE, s[4 + h] != NOT_MINE);
            let mixed = |s: &[i32; STEP_INTS]| s[1] < 0 || kind(s, 0) != kind(s, 1);
            let whole: Vec<_> = steps.iter().take_while(|s| !mixed(s)).map(|s| kind(s, 0)).collect();
            prop_assert!(steps.len() - whole.len() <= 2, "mixed steps only at the end");
            let mut runs: Vec<((bool, bool), usize)> = Vec::new();
            for k in whole {
                match runs.last_mut() {
                    Some((last, n)) if *last == k => *n += 1,
                    _ => runs.push((k, 1)),
                }
            }
            for (i, (k, n)) in runs.iter().enumerate() {
                let kinds_last = runs[i + 1..].iter().all(|(other, _)| other != k);
                prop_assert!(kinds_last || *n == run, "run {i} of kind {k:?}: {n} steps, not {run}");
                prop_assert!(*n >= 1);
            }
        }

        /// Every query block of a plane is in exactly one pair.
        #[test]
        fn pairs_cover_every_query_block_once(
            rows in proptest::collection::vec(sorted_unique(200), 0..30), window in 1usize..40
        ) {
            let rows: Vec<Vec<(i32, i32)>> = rows.iter().map(|r| list(r, 0)).collect();
            let pairs = pair_blocks(&rows, 200, window);
            let mut seen: Vec<usize> = pairs.iter().flat_map(|&(a, b)| std::iter::once(a).chain(b)).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..rows.len()).collect::<Vec<_>>());
            prop_assert_eq!(pairs.len(), rows.len().div_ceil(2));
        }
    }

    #[test]
    fn the_table_of_a_packed_mask_walks_each_query_blocks_own_list() {
        use super::super::blockmask::{pack_for_kernel, FnMask};
        use fragmask_masks::{MaskShape, TileClass};
        // 2 heads, 7 query blocks (odd: one pair has no second block), 9 key blocks, the
        // last partial; some blocks whole, some partial, one row empty.
        let shape = MaskShape::new(1, 2, 420, 560).unwrap();
        let visible = |_b: usize, h: usize, i: usize, j: usize| {
            let (qb, kb) = (i / 64, j / 64);
            let hash = (qb * 7 + kb * 13 + h * 5) % 11;
            qb != 3 && (hash < 3 || (hash == 4 && (i + j) % 3 == 0))
        };
        let mask = pack_for_kernel(&FnMask::new(shape, visible), &Geometry::TILE_64X64).unwrap();
        let table = table(&mask, &Geometry::TILE_64X64_SHARED).unwrap();
        let (mb, ints) = (mask.grid().m_blocks, &table.ints);
        let mut own_loads = 0;
        for plane in 0..2 {
            let mut seen = Vec::new();
            for pair in 0..mb.div_ceil(2) {
                let h = &ints[(plane * mb + pair) * HEADER_INTS..][..HEADER_INTS];
                let (first, steps) = (h[2] as usize, h[3] as usize);
                for (wg, &block) in h[..2].iter().enumerate() {
                    if block < 0 {
                        continue;
                    }
                    let row = plane * mb + block as usize;
                    seen.push(block as usize);
                    let mut got: Vec<(usize, TileClass)> = Vec::new();
                    for s in ints[first..first + steps * STEP_INTS].chunks(STEP_INTS) {
                        for slot in 0..2 {
                            let tile = s[2 + 2 * wg + slot];
                            if tile == NOT_MINE {
                                continue;
                            }
                            let class = if tile == FULL {
                                TileClass::Full
                            } else {
                                TileClass::Partial(tile as usize)
                            };
                            got.push((s[slot] as usize, class));
                        }
                    }
                    got.sort_unstable_by_key(|g| g.0);
                    let want: Vec<(usize, TileClass)> = (0..mask.grid().n_blocks)
                        .map(|n| (n, mask.lists().tile_class(row, n)))
                        .filter(|(_, c)| *c != TileClass::Empty)
                        .collect();
                    own_loads += want.len() as u64;
                    assert_eq!(got, want, "plane {plane} block {block}");
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..mb).collect::<Vec<_>>());
        }
        assert_eq!(table.own_loads, own_loads);
        assert!(table.loads <= table.own_loads);
    }

    #[test]
    fn greedy_pairs_the_blocks_that_share_most() {
        let rows = vec![
            list(&[1, 2, 3], 0),
            list(&[7, 8, 9], 0),
            list(&[1, 2, 3], 0),
            list(&[7, 8], 0),
        ];
        assert_eq!(pair_blocks(&rows, 16, 8), vec![(0, Some(2)), (1, Some(3))]);
        assert_eq!(pair_blocks(&rows, 16, 1), vec![(0, Some(1)), (2, Some(3))]);
    }

    #[test]
    fn the_greedy_window_covers_write_up_002_and_shrinks_for_long_sequences() {
        assert!(greedy_window(12, 364, 364) >= 364);
        assert!(greedy_window(32, 4096, 4096) < 64);
        assert_eq!(greedy_window(usize::MAX, usize::MAX, usize::MAX), 1);
    }
}
