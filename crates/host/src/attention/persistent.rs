//! Persistent CTAs of the forward (docs/architecture.md, "Persistent forward"): the work
//! table a persistent launch walks (`AttentionParams::work`).
//!
//! The one-tile grid launches a CTA per work tile (row block, head, batch) in the order x
//! (the row block counted from the last, so a causal call's longest blocks come first),
//! then head, then batch, and the hardware hands each to the first SM slot that frees.
//! A persistent launch has one CTA per SM slot; the table gives each CTA its tiles. They
//! are dealt in the same launch order, each to the CTA whose tiles so far have the fewest
//! estimated steps ([`work_table`]): the hardware's order, with its balance taken from the
//! step counts instead of measured at run time (FlashAttention-3's and FlashAttention-4's
//! persistent schedulers take a static stride, or an atomic counter for causal calls).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fragmask_kernels::attention::{AttentionParams, Geometry, MaskMode, WINDOW_INFINITE};
use fragmask_masks::PackedMask;

use super::documents::WorkItem;
use super::AttentionError;

/// The cost of a tile's fixed work that persistent CTAs still pay (the schedule, the
/// wait for Q, the O epilogue), in half steps: one half step per tile, two per step.
const TILE_OVERHEAD_HALF_STEPS: u64 = 1;

/// Most work tiles of a persistent launch (a 16 MiB table); a call with more runs the
/// one-tile grid.
pub const MAX_WORK_TILES: usize = 1 << 22;

/// Steps of every row block (index x = the row block counted from the last) of a window
/// walk, the host's copy of the kernel's `fm_make_schedule` (`family::schedule::row_block::WINDOW`,
/// the whole sequence's walk): the key blocks from the lowest to the highest visible one,
/// `step_blocks` per step.
pub fn window_steps(params: &AttentionParams, geometry: &Geometry) -> Vec<u32> {
    let (bm, bn) = (i64::from(geometry.block_m()), i64::from(geometry.block_n()));
    let step = i64::from(geometry.step_blocks().max(1));
    let (sq, sk) = (i64::from(params.seqlen_q), i64::from(params.seqlen_k));
    let n_blocks = i64::from(params.n_blocks);
    let (left, right, diag) = (
        i64::from(params.window_left),
        i64::from(params.window_right),
        i64::from(params.diag_offset),
    );
    let infinite = i64::from(WINDOW_INFINITE);
    let m_blocks = params.m_blocks.max(0) as i64;
    (0..m_blocks)
        .map(|x| {
            let m_block = m_blocks - 1 - x;
            let m0 = m_block * bm;
            let m_end = (m0 + bm).min(sq) - 1;
            let lo = m0 + diag - left;
            let hi = m_end + diag + right;
            let n_first = if left >= infinite || lo <= 0 {
                0
            } else {
                (lo / bn).min(n_blocks)
            };
            let n_last = if right >= infinite || hi >= sk - 1 {
                n_blocks - 1
            } else if hi < 0 {
                -1
            } else {
                hi / bn
            };
            let blocks = (n_last - n_first + 1).max(0);
            ((blocks + step - 1) / step) as u32
        })
        .collect()
}

/// Steps of every work tile of a block-list call in launch order (x fastest, then head,
/// then batch): row `batch * mask_batch_stride + head * mask_head_stride + m_block` of
/// the mask's lists, its partial and full blocks, `step_blocks` per step.
pub fn list_steps(
    params: &AttentionParams,
    mask: &PackedMask,
    geometry: &Geometry,
) -> Result<Vec<u32>, AttentionError> {
    let step = geometry.step_blocks().max(1) as usize;
    let lists = mask.lists();
    let (partial, full) = (lists.num_blocks(), lists.full_num_blocks());
    let m_blocks = params.m_blocks.max(0) as usize;
    let (heads, batch) = (params.heads.max(0) as usize, params.batch.max(0) as usize);
    let (bs, hs) = (
        params.mask_batch_stride.max(0) as usize,
        params.mask_head_stride.max(0) as usize,
    );
    let tiles = tile_count(m_blocks, heads, batch)?;
    let mut steps = Vec::with_capacity(tiles);
    for b in 0..batch {
        for h in 0..heads {
            for x in 0..m_blocks {
                let row = b * bs + h * hs + (m_blocks - 1 - x);
                let (p, f) = match (partial.get(row), full.get(row)) {
                    (Some(&p), Some(&f)) => (p.max(0) as usize, f.max(0) as usize),
                    _ => {
                        return Err(AttentionError::Mask(format!(
                            "list row {row} is outside the mask's {} rows",
                            partial.len().min(full.len())
                        )))
                    }
                };
                steps.push((p + f).div_ceil(step) as u32);
            }
        }
    }
    Ok(steps)
}

/// The steps of every work tile of a block-list call whose lists are on the device only
/// (`AttentionOptions::mask_on_device_only`: the host holds a placeholder with no tile):
/// every key block of every row block, as with no mask, the most any mask of the
/// geometry can visit.
pub fn every_key_block_steps(
    params: &AttentionParams,
    geometry: &Geometry,
    planes: usize,
) -> TileSteps {
    let unbounded = AttentionParams {
        window_left: WINDOW_INFINITE,
        window_right: WINDOW_INFINITE,
        ..*params
    };
    TileSteps::PerRowBlock {
        steps: window_steps(&unbounded, geometry),
        planes,
    }
}

/// Steps of the documents grid's work items in table order (index x is the item).
pub fn document_steps(items: &[WorkItem], geometry: &Geometry) -> Vec<u32> {
    items.iter().map(|i| i.steps(geometry)).collect()
}

/// Work tiles of a call: `m_blocks * heads * batch`, at most [`MAX_WORK_TILES`].
pub fn tile_count(m_blocks: usize, heads: usize, batch: usize) -> Result<usize, AttentionError> {
    m_blocks
        .checked_mul(heads)
        .and_then(|x| x.checked_mul(batch))
        .filter(|&t| t <= MAX_WORK_TILES)
        .ok_or_else(|| {
            AttentionError::Shape(format!(
                "{m_blocks} row blocks x {heads} heads x {batch} batches: more than \
                 {MAX_WORK_TILES} work tiles for persistent CTAs"
            ))
        })
}

/// The CTAs of a persistent launch of `tiles` work tiles on `slots` SM slots (SMs times
/// the geometry's CTAs per SM): one per slot, no more than there are tiles (at least 1).
pub fn cta_count(tiles: usize, slots: usize) -> usize {
    slots.min(tiles).max(1)
}

/// The work tile at launch position `lin` of a one-tile grid of `xs` row-block splits by
/// `planes` (head, batch) planes in sections of `section` planes: `(xi, plane)`, the
/// grid's x index (row-block splits counted from the last row block) and plane. The
/// host's copy of the kernel's `fm_work_at` (`family::schedule::row_block::WORK_GRID`):
/// sections of `section` planes one after the other, and inside a section the x indices
/// in turn, the section's planes fastest (FlashAttention-4's `SingleTileLPTScheduler`);
/// the last section holds the planes left over. A section of 0 or 1 plane is the plain
/// grid order (x fastest, then plane). `lin` must be below `xs * planes`.
pub fn grid_tile(lin: usize, xs: usize, planes: usize, section: usize) -> (usize, usize) {
    let section = section.clamp(1, planes.max(1));
    if section == 1 {
        return (lin % xs.max(1), lin / xs.max(1));
    }
    let per_section = section * xs;
    let sec = lin / per_section;
    let rem = lin - sec * per_section;
    let first = sec * section;
    let width = section.min(planes - first);
    let xi = rem / width;
    (xi, first + (rem - xi * width))
}

/// The order in which [`work_table`] deals the tiles of `steps`: launch order
/// ([`grid_tile`] with `section` planes per section) for the window walk's and the
/// documents grid's per-row-block steps; the plain order (tile index) for the lists.
fn dealing_order(steps: &TileSteps, section: usize) -> Vec<usize> {
    match steps {
        TileSteps::PerRowBlock {
            steps: per_x,
            planes,
        } if section > 1 && !per_x.is_empty() => {
            let xs = per_x.len();
            (0..steps.len())
                .map(|lin| {
                    let (xi, plane) = grid_tile(lin, xs, *planes, section);
                    xi + xs * plane
                })
                .collect()
        }
        _ => (0..steps.len()).collect(),
    }
}

/// The estimated end, in half steps ([`TileSteps`]' cost: two per step, one per tile), of
/// the last of `slots` SM slots that take the tiles of `steps` in launch order with
/// `section` planes per section, each the next tile when it frees (list scheduling: the
/// one-tile grid's dispatch, and [`work_table`]'s dealing).
pub fn makespan(steps: &TileSteps, slots: usize, section: usize) -> u64 {
    let slots = slots.clamp(1, steps.len().max(1));
    let mut free: BinaryHeap<Reverse<u64>> = (0..slots).map(|_| Reverse(0)).collect();
    let mut end = 0;
    for t in dealing_order(steps, section) {
        let Some(Reverse(at)) = free.pop() else {
            break;
        };
        let done = at + steps.cost(t);
        end = end.max(done);
        free.push(Reverse(done));
    }
    end
}

/// The work table of `ctas` persistent CTAs over the work tiles of `steps` (tile t = x +
/// m_blocks (head + heads batch)): `ctas + 1` offsets, then the tiles of CTA 0, CTA 1, ...
/// Each tile goes, in launch order ([`grid_tile`] with `section` planes per section for
/// per-row-block steps; tile order for the lists), to the CTA with the fewest estimated
/// half steps so far (two per step plus one per tile), the lowest index on a tie; every
/// tile appears exactly once, and each CTA runs its tiles in launch order.
pub fn work_table(
    steps: &TileSteps,
    ctas: usize,
    section: usize,
) -> Result<Vec<i32>, AttentionError> {
    let tiles = steps.len();
    if tiles > MAX_WORK_TILES || ctas == 0 {
        return Err(AttentionError::Shape(format!(
            "{tiles} work tiles over {ctas} persistent CTAs"
        )));
    }
    let ctas = ctas.min(tiles.max(1));
    let dealt = dealing_order(steps, section);
    let mut load: BinaryHeap<Reverse<(u64, usize)>> = (0..ctas).map(|c| Reverse((0, c))).collect();
    let mut owner = Vec::with_capacity(tiles);
    for &t in &dealt {
        let Some(Reverse((so_far, cta))) = load.pop() else {
            break;
        };
        owner.push(cta as u32);
        let cost = steps.cost(t);
        load.push(Reverse((so_far + cost, cta)));
    }
    // Counting sort by CTA, keeping each CTA's tiles in launch order.
    let mut offsets = vec![0usize; ctas + 1];
    for &c in &owner {
        offsets[c as usize + 1] += 1;
    }
    for c in 0..ctas {
        offsets[c + 1] += offsets[c];
    }
    let mut next = offsets.clone();
    let mut order = vec![0i32; tiles];
    for (&t, &c) in dealt.iter().zip(owner.iter()) {
        order[next[c as usize]] = t as i32;
        next[c as usize] += 1;
    }
    let mut table = Vec::with_capacity(ctas + 1 + tiles);
    table.extend(offsets.iter().map(|&o| o as i32));
    table.extend(order);
    Ok(table)
}

/// The steps of a call's work tiles in launch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TileSteps {
    /// One count per row-block index x, the same in each of `planes` (head, batch) planes
    /// (the window walk and the documents grid).
    PerRowBlock {
        /// Steps of row-block index x.
        steps: Vec<u32>,
        /// Heads times batch.
        planes: usize,
    },
    /// One count per tile (the block lists, which differ by head and batch).
    PerTile(Vec<u32>),
}

/// The steps of every work tile of a call of `mode` ([`window_steps`], [`list_steps`] of
/// `mask`, or [`document_steps`] of its documents) over `planes` (head, batch) planes.
pub fn tile_steps(
    params: &AttentionParams,
    mode: MaskMode,
    mask: Option<&PackedMask>,
    geometry: &Geometry,
    planes: usize,
) -> Result<TileSteps, AttentionError> {
    Ok(match (mode, mask) {
        (MaskMode::Blocks, Some(mask)) => TileSteps::PerTile(list_steps(params, mask, geometry)?),
        (MaskMode::Documents, Some(mask)) => {
            let docs = mask.documents().ok_or_else(|| {
                AttentionError::Mask("the documents grid needs a mask with documents".into())
            })?;
            TileSteps::PerRowBlock {
                steps: document_steps(&super::documents::work_items(docs, geometry), geometry),
                planes,
            }
        }
        (MaskMode::Window, _) => TileSteps::PerRowBlock {
            steps: window_steps(params, geometry),
            planes,
        },
        (_, None) => {
            return Err(AttentionError::Mask(format!(
                "the {} mode needs a packed mask",
                mode.name()
            )))
        }
    })
}

impl TileSteps {
    /// Tiles of the call.
    pub fn len(&self) -> usize {
        match self {
            TileSteps::PerRowBlock { steps, planes } => steps.len().saturating_mul(*planes),
            TileSteps::PerTile(s) => s.len(),
        }
    }

    /// Whether the call has no tile.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated half steps of tile `t`: two per key step, one for the tile.
    fn cost(&self, t: usize) -> u64 {
        2 * u64::from(self.get(t)) + TILE_OVERHEAD_HALF_STEPS
    }

    /// Whether the static table can balance `slots` CTAs: the longest tile's estimate is
    /// at most a third of a CTA's mean share. Where one tile is a large part of a CTA's
    /// work (causal S = 4096: 32 of a mean 64 steps per CTA), an estimate that misses the
    /// real cost of the longest tiles ends CTAs far apart, while the one-tile grid's
    /// dispatch measures it (an H100, 2 rounds: causal S = 4096 1.014 of the one-tile
    /// time, S = 8192 0.990).
    pub fn balances(&self, slots: usize) -> bool {
        let total: u64 = (0..self.len()).map(|t| self.cost(t)).sum();
        let longest = (0..self.len()).map(|t| self.cost(t)).max().unwrap_or(0);
        longest.saturating_mul(3).saturating_mul(slots as u64) <= total
    }

    /// Whether the tiles' mean walk is at most `steps` key steps.
    pub fn mean_at_most(&self, steps: u32) -> bool {
        let total: u64 = (0..self.len()).map(|t| u64::from(self.get(t))).sum();
        total <= u64::from(steps).saturating_mul(self.len() as u64)
    }

    /// Key steps of tile `t` (`t` below [`Self::len`]).
    pub fn steps_of(&self, t: usize) -> u32 {
        self.get(t)
    }

    fn get(&self, t: usize) -> u32 {
        match self {
            TileSteps::PerRowBlock { steps, .. } => steps[t % steps.len()],
            TileSteps::PerTile(s) => s[t],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every tile once; each CTA's tiles in the order `dealt` (tile indices in launch order).
    fn check_table(table: &[i32], ctas: usize, dealt: &[usize]) {
        let tiles = dealt.len();
        let mut position = vec![usize::MAX; tiles];
        for (i, &t) in dealt.iter().enumerate() {
            position[t] = i;
        }
        assert_eq!(table.len(), ctas + 1 + tiles);
        assert_eq!(table[0], 0);
        assert_eq!(table[ctas] as usize, tiles);
        assert!(table[..=ctas].windows(2).all(|w| w[0] <= w[1]));
        let mut seen = vec![false; tiles];
        for c in 0..ctas {
            let own = &table[ctas + 1 + table[c] as usize..ctas + 1 + table[c + 1] as usize];
            assert!(
                own.windows(2)
                    .all(|w| position[w[0] as usize] < position[w[1] as usize]),
                "CTA {c}: launch order"
            );
            for &t in own {
                assert!(!seen[t as usize], "tile {t} twice");
                seen[t as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    /// Each CTA's estimated half steps (two per step, one per tile).
    fn loads(table: &[i32], ctas: usize, s: &TileSteps) -> Vec<u64> {
        (0..ctas)
            .map(|c| {
                table[ctas + 1 + table[c] as usize..ctas + 1 + table[c + 1] as usize]
                    .iter()
                    .map(|&t| s.cost(t as usize))
                    .sum()
            })
            .collect()
    }

    proptest! {
        #![proptest_config(super::super::proptest_ci::config(64))]

        #[test]
        fn every_tile_runs_once_in_launch_order_and_no_cta_idles_past_the_longest_tile(
            steps in proptest::collection::vec(0u32..300, 1..300),
            planes in 1usize..6,
            ctas in 1usize..400,
            per_tile in any::<bool>(),
            section in 1usize..8,
        ) {
            let s = if per_tile {
                TileSteps::PerTile(steps)
            } else {
                TileSteps::PerRowBlock { steps, planes }
            };
            let ctas = cta_count(s.len(), ctas);
            let table = work_table(&s, ctas, section).unwrap();
            check_table(&table, ctas, &dealing_order(&s, section));
            // List scheduling: a CTA got its last tile while it was the least loaded, so no
            // CTA ends more than one tile's cost after another.
            let l = loads(&table, ctas, &s);
            let longest = (0..s.len()).map(|t| s.cost(t)).max().unwrap_or(0);
            let (lo, hi) = (*l.iter().min().unwrap(), *l.iter().max().unwrap());
            prop_assert!(hi - lo <= longest, "loads {}..{} longest {}", lo, hi, longest);
        }
    }

    proptest! {
        #![proptest_config(super::super::proptest_ci::config(64))]

        #[test]
        fn the_launch_order_visits_every_tile_once_sections_in_turn_longest_first(
            xs in 1usize..40,
            planes in 1usize..40,
            section in 0usize..50,
        ) {
            let tiles = xs * planes;
            let mut seen = vec![false; tiles];
            let width = section.clamp(1, planes);
            let mut last: Option<(usize, usize)> = None;
            for lin in 0..tiles {
                let (xi, plane) = grid_tile(lin, xs, planes, section);
                prop_assert!(xi < xs && plane < planes);
                prop_assert!(!seen[xi + xs * plane], "tile ({}, {}) twice", xi, plane);
                seen[xi + xs * plane] = true;
                // Sections in turn; inside one, x never decreases (longest row block first).
                if let Some((px, pp)) = last {
                    let (ps, s) = (pp / width, plane / width);
                    prop_assert!(ps < s || (ps == s && px <= xi));
                }
                last = Some((xi, plane));
            }
            // A section of one plane is the plain grid order.
            prop_assert_eq!(grid_tile(tiles - 1, xs, planes, 1), (xs - 1, planes - 1));
        }

        /// The deterministic backward's safety with sections (docs/backward.md,
        /// "Deterministic mode"): a CTA waits only for lower-ranked key tiles of its own plane,
        /// ranked in x order, so each plane's tiles must launch in x order whatever the
        /// section, interleaved with other planes or not.
        #[test]
        fn each_planes_tiles_launch_in_x_order_at_any_section(
            xs in 1usize..40,
            planes in 1usize..40,
            section in 0usize..50,
        ) {
            let mut next_x = vec![0usize; planes];
            for lin in 0..xs * planes {
                let (xi, plane) = grid_tile(lin, xs, planes, section);
                prop_assert_eq!(xi, next_x[plane], "plane {} launched x {} early", plane, xi);
                next_x[plane] += 1;
            }
            prop_assert!(next_x.iter().all(|&n| n == xs));
        }
    }

    #[test]
    fn every_tile_is_run_once_in_launch_order_per_cta() {
        for (rows, planes, ctas) in [(128, 16, 132), (5, 1, 132), (364, 12, 264), (1, 1, 1)] {
            let steps: Vec<u32> = (0..rows).map(|x| (rows - x) as u32).collect();
            let s = TileSteps::PerRowBlock { steps, planes };
            let ctas = ctas.min(s.len());
            for section in [1, 4, 5] {
                let table = work_table(&s, ctas, section).unwrap();
                check_table(&table, ctas, &dealing_order(&s, section));
            }
        }
    }

    #[test]
    fn causal_tiles_balance_within_one_tile_of_the_mean() {
        // S = 16384, 128-row blocks, 16 heads, 132 CTAs: x = 0 is the longest (128 steps).
        let steps: Vec<u32> = (0..128u32).map(|x| 128 - x).collect();
        let s = TileSteps::PerRowBlock { steps, planes: 16 };
        let table = work_table(&s, 132, 1).unwrap();
        let loads = loads(&table, 132, &s);
        let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        assert!(hi - lo <= 2 * 128 + 1, "loads {lo}..{hi}");
    }

    #[test]
    fn sections_deal_longest_first_and_end_the_ctas_within_a_short_tile() {
        // Causal S = 4096 at 128x128, 16 heads, 132 CTAs, one section of every head: the
        // tiles are dealt longest first (list scheduling in LPT order), so the CTAs end
        // within a few steps of each other; head after head ends them a long tile apart.
        let steps: Vec<u32> = (0..32u32).map(|x| 32 - x).collect();
        let s = TileSteps::PerRowBlock { steps, planes: 16 };
        let spread = |section| {
            let l = loads(&work_table(&s, 132, section).unwrap(), 132, &s);
            l.iter().max().unwrap() - l.iter().min().unwrap()
        };
        assert!(spread(16) <= 2 * 2 + 1, "sections: {}", spread(16));
        assert!(spread(1) > 2 * 16, "plain: {}", spread(1));
    }

    #[test]
    fn long_causal_walks_balance_and_short_ones_with_few_tiles_per_cta_do_not() {
        // Causal at 128x128, 16 heads, 132 CTAs: S = 4096 (32 row blocks) has a longest
        // tile of half a CTA's share, S = 8192 of a quarter.
        let causal = |rows: u32| TileSteps::PerRowBlock {
            steps: (0..rows).map(|x| rows - x).collect(),
            planes: 16,
        };
        assert!(!causal(32).balances(132));
        assert!(causal(64).balances(132));
        assert!(causal(128).balances(132));
        // Equal tiles balance whenever each CTA gets three.
        let equal = |tiles: usize| TileSteps::PerTile(vec![9; tiles]);
        assert!(equal(3 * 132).balances(132));
        assert!(!equal(2 * 132).balances(132));
    }

    #[test]
    fn the_window_steps_are_the_kernel_walk() {
        let g = Geometry::TILE_128X128;
        let params = AttentionParams {
            seqlen_q: 16384,
            seqlen_k: 16384,
            m_blocks: 128,
            n_blocks: 128,
            window_left: WINDOW_INFINITE,
            window_right: 0,
            ..AttentionParams::default()
        };
        // Causal: row block m visits key blocks 0..=m; x = 0 is row block 127.
        let causal = window_steps(&params, &g);
        assert_eq!(causal.len(), 128);
        assert!(causal.iter().enumerate().all(|(x, &s)| s == 128 - x as u32));
        // Window 1024 to the left: 9 blocks, 8 in the first row block (keys 0..127 only).
        let window = window_steps(
            &AttentionParams {
                window_left: 1024,
                ..params
            },
            &g,
        );
        assert_eq!(window[0], 9);
        assert_eq!(window[127], 1);
        assert_eq!(window[127 - 8], 9);
        // No mask: every block; 64x64/2 takes two per step.
        let none = window_steps(
            &AttentionParams {
                window_right: WINDOW_INFINITE,
                ..params
            },
            &g,
        );
        assert!(none.iter().all(|&s| s == 128));
        let g64 = Geometry::TILE_64X64;
        let p64 = AttentionParams {
            m_blocks: 256,
            n_blocks: 256,
            window_right: WINDOW_INFINITE,
            ..params
        };
        assert!(window_steps(&p64, &g64).iter().all(|&s| s == 128));
    }

    #[test]
    fn device_only_lists_take_every_key_block_of_every_tile() {
        // Whatever window fields a block-list call's params hold: every key block.
        let params = AttentionParams {
            seqlen_q: 1000,
            seqlen_k: 3000,
            m_blocks: 8,
            n_blocks: 24,
            window_left: 7,
            window_right: 0,
            ..AttentionParams::default()
        };
        let steps = every_key_block_steps(&params, &Geometry::TILE_128X128, 3);
        assert_eq!(steps.len(), 24);
        assert!((0..24).all(|t| steps.steps_of(t) == 24));
        let p64 = AttentionParams {
            m_blocks: 16,
            n_blocks: 47,
            ..params
        };
        let two = every_key_block_steps(&p64, &Geometry::TILE_64X64, 2);
        assert_eq!(two.len(), 32);
        assert!((0..32).all(|t| two.steps_of(t) == 24));
    }
}
