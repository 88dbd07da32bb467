//! The deterministic backward's walk orders (docs/backward.md, "Deterministic mode"): the
//! order in which each key tile visits its query tiles, chosen so that a tile reaches each
//! query tile about when the tile ranked before it there has left it.
//!
//! In the deterministic mode the key tiles visiting a query tile add their dQ in their
//! plane's launch order (index order for the tile lists), each waiting for the one before.
//! Walked in ascending order, a key tile queues at every query tile the tiles below it also
//! visit, at whatever point of their own walks they get there. Here each key tile, in launch
//! order, takes its query tiles by when the tile before it leaves each of them (list
//! scheduling: a step costs one unit, a turn [`TURN_UNITS_PER_STEP`] of one more, and a
//! plane's key tiles start `at_once` at a time). The order is a function of the mask
//! alone, so dK and dV, summed in walk order, stay bit-identical run to run.
//! `bench/deterministic_turns_model.py` models the gain (block-sparse 10%, S = 16384,
//! H = 16, 8 planes per launch section: 1.18x the non-deterministic time against 1.34x).

use alloc::vec;
use alloc::vec::Vec;

use crate::BlockLists;

/// A turn's latency in hundredths of a step (the model's 0.3 of a two-step query tile).
pub const TURN_UNITS_PER_STEP: i64 = 15;

/// The walk orders of transposed lists ([`deterministic_walks`]), as the kernels'
/// `q_num_blocks`, `q_indices` and `q_tile_offsets`: every query tile of a row, partial or
/// full, as a partial entry in walk order, whose tile offset is `-1` for a full tile (the
/// kernels read no words there). The full lists they replace are empty (every
/// `full_q_num_blocks` 0), so they are not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeterministicWalks {
    /// Entries per row, `[rows]`.
    pub counts: Vec<i32>,
    /// Query tiles per row in walk order, `[rows, row_len]`.
    pub indices: Vec<i32>,
    /// Their words tiles, `-1` for a full tile, `[rows, row_len]`.
    pub tile_offsets: Vec<i32>,
}

/// Lists of at least this many entries (rows x row length) are walked on several threads,
/// a plane each at a time (`std` only); smaller ones on the calling thread.
const PARALLEL_MIN_ENTRIES: usize = 1 << 20;

/// The walk order of each row of `transposed` (`planes` planes of equal rows, each
/// launched `at_once` key tiles at a time). Every row is walked whatever `planes` says
/// (a last plane of fewer rows where it does not divide them). Computed when a call is
/// planned: 1.2 ms for 16 planes of 128 key tiles at 10% of the tiles (S = 16384) on one
/// core of the development machine; at 512 (S = 65536), where the planes run on as many
/// threads as the machine has, 27 ms on one core and 13.6 ms on two. The result does not
/// depend on the threads.
pub fn deterministic_walks(
    transposed: &BlockLists,
    planes: usize,
    at_once: usize,
) -> DeterministicWalks {
    let entries = transposed.rows().saturating_mul(transposed.row_len());
    walks_on_threads(transposed, planes, at_once, entries >= PARALLEL_MIN_ENTRIES)
}

/// [`deterministic_walks`], its planes on several threads where `parallel` (and `std`).
fn walks_on_threads(
    transposed: &BlockLists,
    planes: usize,
    at_once: usize,
    parallel: bool,
) -> DeterministicWalks {
    let rows = transposed.rows();
    let row_len = transposed.row_len();
    let mut out = DeterministicWalks {
        counts: vec![0i32; rows],
        indices: vec![0i32; rows * row_len],
        tile_offsets: vec![0i32; rows * row_len],
    };
    if rows == 0 || row_len == 0 {
        return out;
    }
    let per_plane = rows.div_ceil(planes.max(1)).max(1);
    let jobs = out
        .counts
        .chunks_mut(per_plane)
        .zip(out.indices.chunks_mut(per_plane * row_len))
        .zip(out.tile_offsets.chunks_mut(per_plane * row_len))
        .enumerate()
        .map(|(plane, ((counts, indices), tile_offsets))| PlaneWalk {
            first_row: plane * per_plane,
            counts,
            indices,
            tile_offsets,
        });
    let walk = |job: &mut PlaneWalk<'_>| walk_plane(transposed, per_plane, at_once, job);
    #[cfg(not(feature = "std"))]
    let _ = parallel;
    #[cfg(feature = "std")]
    if parallel {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Mutex;
        let slots: Vec<Mutex<PlaneWalk<'_>>> = jobs.map(Mutex::new).collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, slots.len().min(crate::MAX_THREADS));
        let next = AtomicUsize::new(0);
        let work = || {
            while let Some(slot) = slots.get(next.fetch_add(1, Ordering::Relaxed)) {
                walk(&mut slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
            }
        };
        crate::workers::run_on_threads(threads, work);
        drop(slots);
        return out;
    }
    jobs.for_each(|mut job| walk(&mut job));
    out
}

/// One plane's rows of the walk orders being written.
struct PlaneWalk<'a> {
    first_row: usize,
    counts: &'a mut [i32],
    indices: &'a mut [i32],
    tile_offsets: &'a mut [i32],
}

/// The list-scheduling model of [`deterministic_walks`] over one plane: its key tiles (or
/// the paired backward's key-block pairs), taken in launch order, each order their query
/// tiles by when the one before them at each query tile is expected to leave it.
#[derive(Debug, Clone)]
pub struct PlaneWalker {
    /// When each query tile's last visitor (in launch order) is expected to leave it.
    free: Vec<Option<i64>>,
    /// A key tile's mean steps, in hundredths: one launch wave's spacing.
    mean: i64,
    at_once: i64,
}

impl PlaneWalker {
    /// One step in hundredths.
    const STEP: i64 = 100;

    /// A plane of `query_tiles` query tiles whose `key_tiles` walkers take `steps` steps in
    /// all, launched `at_once` at a time.
    pub fn new(query_tiles: usize, steps: usize, key_tiles: usize, at_once: usize) -> Self {
        let steps = i64::try_from(steps).unwrap_or(i64::MAX / Self::STEP);
        let key_tiles = i64::try_from(key_tiles.max(1)).unwrap_or(i64::MAX);
        Self {
            free: vec![None; query_tiles],
            mean: steps.saturating_mul(Self::STEP) / key_tiles,
            at_once: i64::try_from(at_once.max(1)).unwrap_or(i64::MAX),
        }
    }

    /// Orders the steps of the plane's `n`-th walker (launch order, each walker once, in
    /// order) by when their query tile (`query_tile` of a step) is expected to be free,
    /// and records when this walker leaves each. Steps outside the plane's query tiles go
    /// first and are not recorded.
    pub fn walk<T>(&mut self, n: usize, steps: &mut [T], query_tile: impl Fn(&T) -> usize) {
        let free = |q: usize| self.free.get(q).copied().flatten();
        steps.sort_by_key(|s| {
            let q = query_tile(s);
            (free(q), q)
        });
        let wave = i64::try_from(n).unwrap_or(i64::MAX) / self.at_once;
        let mut t = wave.saturating_mul(self.mean);
        for s in steps.iter() {
            if let Some(slot) = self.free.get_mut(query_tile(s)) {
                t = t.max(slot.unwrap_or(0)).saturating_add(Self::STEP);
                *slot = Some(t + TURN_UNITS_PER_STEP * Self::STEP / 100);
            }
        }
    }
}

/// Walks the rows of one plane (list scheduling in launch order, [`deterministic_walks`]).
fn walk_plane(transposed: &BlockLists, per_plane: usize, at_once: usize, job: &mut PlaneWalk<'_>) {
    let row_len = transposed.row_len();
    let [num, idx, full_num, full_idx, offsets] = transposed.parts();
    let plane_rows = job.first_row..job.first_row + job.counts.len();
    let entries: usize = plane_rows
        .clone()
        .map(|r| num[r].max(0) as usize + full_num[r].max(0) as usize)
        .sum();
    let mut walker = PlaneWalker::new(row_len, entries, per_plane, at_once);
    // One row's entries (query tile, words tile or -1).
    let mut row: Vec<(i32, i32)> = Vec::with_capacity(row_len);
    for (n, r) in plane_rows.enumerate() {
        let base = r * row_len;
        let (np, nf) = (num[r].max(0) as usize, full_num[r].max(0) as usize);
        row.clear();
        row.extend(
            (0..np.min(row_len))
                .map(|e| (idx[base + e], offsets[base + e]))
                .chain((0..nf.min(row_len)).map(|e| (full_idx[base + e], -1)))
                .filter(|&(q, _)| (q as usize) < row_len),
        );
        walker.walk(n, &mut row, |&(q, _)| q as usize);
        job.counts[n] = row.len() as i32;
        let local = n * row_len;
        for (e, &(q, off)) in row.iter().enumerate() {
            job.indices[local + e] = q;
            job.tile_offsets[local + e] = off;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{pack, DenseMask, Encoding, PackOptions, TiledAccumulator};
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn transposed_lists(bits: &[u8], heads: usize, sq: usize, sk: usize) -> BlockLists {
        let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
        let mut p = pack(
            &DenseMask::new(bits, &[heads, sq, sk]).unwrap(),
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap();
        p.add_transposed(
            &TiledAccumulator::new(128, 128, 2, true).unwrap(),
            &PackOptions::default(),
        )
        .unwrap();
        p.transposed().unwrap().lists().clone()
    }

    fn block_bits(heads: usize, tiles: usize, seed: u64, keep: u64, inside: u64) -> Vec<u8> {
        let s = tiles * 128;
        let mut x = seed;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % 100
        };
        let kept: Vec<bool> = (0..heads * tiles * tiles).map(|_| next() < keep).collect();
        let mut bits = vec![0u8; heads * s * s];
        for h in 0..heads {
            for i in 0..s {
                for j in 0..s {
                    let tile = kept[(h * tiles + i / 128) * tiles + j / 128];
                    bits[(h * s + i) * s + j] = u8::from(tile && next() < inside);
                }
            }
        }
        bits
    }

    proptest! {
        #![proptest_config(crate::bits::proptest_ci::config(16))]

        #[test]
        fn each_walk_visits_its_rows_query_tiles_once_full_ones_with_no_words(
            heads in 1usize..3, tiles in 1usize..6, seed in any::<u64>(), keep in 10u64..100,
            inside in prop_oneof![Just(100u64), 30u64..100], at_once in 1usize..8,
        ) {
            let t = transposed_lists(&block_bits(heads, tiles, seed, keep, inside), heads, tiles * 128, tiles * 128);
            let w = deterministic_walks(&t, heads, at_once);
            let (num, idx, offsets) = (&w.counts, &w.indices, &w.tile_offsets);
            let [pn, pi, fnum, fi, po] = t.parts();
            let len = t.row_len();
            prop_assert_eq!((num.len(), idx.len(), offsets.len()), (t.rows(), t.rows() * len, t.rows() * len));
            for r in 0..t.rows() {
                let mut want: Vec<(i32, i32)> = (0..pn[r] as usize).map(|e| (pi[r * len + e], po[r * len + e]))
                    .chain((0..fnum[r] as usize).map(|e| (fi[r * len + e], -1))).collect();
                let mut got: Vec<(i32, i32)> = (0..num[r] as usize).map(|e| (idx[r * len + e], offsets[r * len + e])).collect();
                want.sort_unstable();
                got.sort_unstable();
                prop_assert_eq!(got, want, "row {}", r);
            }
        }
    }

    #[test]
    fn a_mask_that_every_key_tile_sees_whole_walks_in_ascending_order() {
        let t = transposed_lists(&vec![1u8; 2 * 512 * 512], 2, 512, 512);
        let w = deterministic_walks(&t, 2, 4);
        for r in 0..t.rows() {
            assert_eq!(w.counts[r], 4);
            assert_eq!(&w.indices[r * 4..r * 4 + 4], &[0, 1, 2, 3]);
        }
    }

    #[test]
    fn every_row_is_walked_whatever_the_plane_count() {
        let t = transposed_lists(&block_bits(3, 4, 5, 60, 100), 3, 512, 512);
        for planes in [0, 1, 2, 3, 5, 100] {
            let w = deterministic_walks(&t, planes, 2);
            for r in 0..t.rows() {
                let (np, nf) = (t.num_blocks()[r], t.full_num_blocks()[r]);
                assert_eq!(w.counts[r], np + nf, "planes {planes}, row {r}");
            }
        }
    }

    #[test]
    fn the_walks_do_not_depend_on_the_threads() {
        let t = transposed_lists(&block_bits(3, 5, 11, 50, 70), 3, 640, 640);
        for planes in [1, 2, 3, 7] {
            assert_eq!(
                walks_on_threads(&t, planes, 2, true),
                walks_on_threads(&t, planes, 2, false),
                "planes {planes}"
            );
        }
    }

    #[test]
    fn the_walks_are_a_function_of_the_lists() {
        let t = transposed_lists(&block_bits(2, 5, 9, 40, 60), 2, 640, 640);
        assert_eq!(deterministic_walks(&t, 2, 3), deterministic_walks(&t, 2, 3));
    }
}
