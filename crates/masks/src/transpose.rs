//! The transposed tile lists of the backward pass and its partial tiles' words.
//!
//! The backward pass runs one CTA per key tile and walks the query tiles of that key
//! tile, so it reads FlexAttention's transposed `BlockMask` lists: per
//! `(batch, head, n_block)`, the `m_block`s whose tile is partial (`q_num_blocks`,
//! `q_indices`) and full (`full_q_num_blocks`, `full_q_indices`), ascending. They are
//! the forward lists transposed, exactly as FlexAttention's `_transpose_ordered`
//! (torch/nn/attention/flex_attention.py) builds them: the block-level matrix of each
//! list transposed, then each row's set entries in ascending order (entries past the
//! count are 0 here, as in the forward lists).
//!
//! The backward kernel computes `Sᵀ = K Qᵀ` for each (key tile, query tile) in its own
//! accumulator, so a partial tile's bits are stored a second time in that
//! accumulator's register order: FragmentNative over the *backward* accumulator, a
//! [`TiledAccumulator`] of the same `block_m × block_n` tile, normally with SwapAB (its
//! MMA rows are the tile's keys, FlashAttention-3's `SdP_swapAB`). Bit `b` of word `w`
//! of thread `t` is the element `(q, k) = backward.coord(t, 32w + b)` of the tile:
//! derived by walking `coord`, never written by hand. The words are ordered as the
//! backward walks them, `(batch, head, n_block, m_block)`, and `q_tile_offsets` points
//! into them as `kv_tile_offsets` does for the forward.

use alloc::vec;
use alloc::vec::Vec;

use fragmask_gmma_frag::TiledAccumulator;

use crate::encoding::EncodedLayout;
use crate::lists::{BlockLists, ListDirection};
use crate::pack::{fresh_words, try_vec};
use crate::plan::Transcoder;
use crate::shape::{broadcast_index, TileGrid};
use crate::{bits, Encoding, MaskError, PackedMask, TileClass};

/// The encoding of the transposed tiles' words (the only one).
pub const TRANSPOSED_ENCODING: Encoding = Encoding::FragmentNative;

/// The backward pass's tile lists and words (module docs; docs/masks.md).
///
/// The lists ([`BlockLists`], [`ListDirection::Transposed`]) are `[B, H, n_blocks]`
/// (counts) and `[B, H, n_blocks, m_blocks]` (indices, ascending; entries past the
/// count are 0, and -1 in the tile offsets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposedLists {
    pub(crate) layout: EncodedLayout,
    pub(crate) grid: TileGrid,
    pub(crate) lists: BlockLists,
    pub(crate) words: Vec<u32>,
}

/// The transposed lists of a packed mask's forward lists, in canonical form (tile
/// offsets numbered in list order), and for every transposed partial tile (in
/// `(batch, head, n_block, m_block)` order) the index of the same tile among the
/// forward words.
pub(crate) struct Transposed {
    pub lists: BlockLists,
    pub forward_tile: Vec<u32>,
}

/// Transposes the forward lists (which the caller has validated: counts and indices in
/// range, tile offsets in `0..partial_tiles`).
pub(crate) fn transpose_lists(
    grid: &TileGrid,
    forward: &BlockLists,
    partial_tiles: usize,
) -> Result<Transposed, MaskError> {
    let [kv_num, kv_indices, full_num, full_indices, kv_offsets] = forward.parts();
    let (mb, nb) = (grid.m_blocks, grid.n_blocks);
    let planes = kv_num.len() / mb.max(1);
    let mut lists = BlockLists::empty(ListDirection::Transposed, planes * nb, mb)?;
    let mut forward_tile = try_vec(partial_tiles, 0, "transposed tile order")?;
    let (q_num, q_indices, full_q_num, full_q_indices, q_offsets) = lists.parts_mut();
    // Counts per transposed row.
    for (num, indices, counts) in [
        (kv_num, kv_indices, &mut *q_num),
        (full_num, full_indices, &mut *full_q_num),
    ] {
        for (row, &count) in num.iter().enumerate() {
            let plane = row / mb;
            for &n in &indices[row * nb..][..count as usize] {
                counts[plane * nb + n as usize] += 1;
            }
        }
    }
    // First transposed tile of each transposed row: a prefix sum of the counts.
    let mut first = try_vec(planes * nb, 0usize, "transposed tile lists")?;
    let mut next = 0usize;
    for (row, (f, &count)) in first.iter_mut().zip(q_num.iter()).enumerate() {
        *f = next;
        for (j, slot) in q_offsets[row * mb..][..count as usize]
            .iter_mut()
            .enumerate()
        {
            *slot = (next + j) as i32;
        }
        next += count as usize;
    }
    // Rows in (plane, m_block) order, so every transposed row fills ascending.
    let mut fill = try_vec(planes * nb, 0usize, "transposed tile lists")?;
    let mut full_fill = try_vec(planes * nb, 0usize, "transposed tile lists")?;
    for (row, (&count, &full_count)) in kv_num.iter().zip(full_num).enumerate() {
        let (plane, m) = (row / mb, row % mb);
        let base = row * nb;
        for j in 0..count as usize {
            let t = plane * nb + kv_indices[base + j] as usize;
            q_indices[t * mb + fill[t]] = m as i32;
            forward_tile[first[t] + fill[t]] = kv_offsets[base + j] as u32;
            fill[t] += 1;
        }
        for &n in &full_indices[base..][..full_count as usize] {
            let t = plane * nb + n as usize;
            full_q_indices[t * mb + full_fill[t]] = m as i32;
            full_fill[t] += 1;
        }
    }
    Ok(Transposed {
        lists,
        forward_tile,
    })
}

impl TransposedLists {
    /// The backward accumulator that `fragmask pack --transposed` uses by default for a
    /// forward tile `block_m × block_n`: SwapAB (the MMA computes `Sᵀ`, its rows the
    /// tile's keys, FlashAttention-3's `SdP_swapAB`), 2 warpgroups when `block_n` is a
    /// multiple of 128, else 1.
    ///
    /// ```
    /// use fragmask_masks::{TiledAccumulator, TransposedLists};
    /// let fwd = TiledAccumulator::new(128, 128, 2, false).unwrap();
    /// let bwd = TransposedLists::default_accumulator(&fwd).unwrap();
    /// assert_eq!((bwd.block_m(), bwd.block_n(), bwd.warpgroups(), bwd.swap_ab()), (128, 128, 2, true));
    /// ```
    pub fn default_accumulator(forward: &TiledAccumulator) -> Result<TiledAccumulator, MaskError> {
        let warpgroups = if forward.block_n().is_multiple_of(128) {
            2
        } else {
            1
        };
        Ok(TiledAccumulator::new(
            forward.block_m(),
            forward.block_n(),
            warpgroups,
            true,
        )?)
    }

    /// Builds the transposed lists and words of `packed` for the backward accumulator
    /// `backward` (same `block_m × block_n` as the forward tile) with `threads` workers
    /// (0 = all available; 1 without `std`).
    pub(crate) fn build(
        packed: &PackedMask,
        backward: &TiledAccumulator,
        threads: usize,
    ) -> Result<TransposedLists, MaskError> {
        let derived = derive(&packed.layout, backward)?;
        let (layout, transcoder) = (&derived.0, &derived.1);
        let grid = packed.grid;
        let partial_tiles = packed.partial_tiles();
        let t = transpose_lists(&grid, &packed.lists, partial_tiles)?;
        let per_tile = layout.words_per_tile();
        let total = partial_tiles
            .checked_mul(per_tile)
            .ok_or(MaskError::TooLarge {
                what: "transposed words",
                value: u64::MAX,
                limit: usize::MAX as u64,
            })?;
        let mut words = fresh_words(total, "transposed words")?;
        transcode_all(packed, transcoder, &t.forward_tile, &mut words, threads);
        Ok(TransposedLists {
            layout: layout.clone(),
            grid,
            lists: t.lists,
            words,
        })
    }

    /// The backward accumulator (the transposed words' register order).
    pub fn accumulator(&self) -> &TiledAccumulator {
        self.layout.accumulator()
    }

    /// The transposed words' derived bit positions (FragmentNative over
    /// [`Self::accumulator`]).
    pub fn layout(&self) -> &EncodedLayout {
        &self.layout
    }

    /// The tile grid (the forward's).
    pub fn grid(&self) -> &TileGrid {
        &self.grid
    }

    /// The transposed tile lists: per `(batch, head, n_block)` row, the partial and
    /// full `m_block`s and the partial tiles' indices into [`Self::words`]
    /// (FlexAttention's `q_num_blocks`, `q_indices`, `full_q_num_blocks`,
    /// `full_q_indices`, and `q_tile_offsets`).
    pub fn lists(&self) -> &BlockLists {
        &self.lists
    }

    /// All partial tiles' words in the backward's order, `[partial_tiles, threads,
    /// words_per_thread]` of [`Self::accumulator`] (the file's `q_words`).
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The backward's dispatch order of the key tiles ([`crate::tile_order`] of the query tiles
    /// each transposed row visits, partial and full): `[B, H, n_blocks]` of the stored
    /// (broadcast) planes.
    ///
    /// ```
    /// use fragmask_masks::{pack, DenseMask, Encoding, PackOptions, TiledAccumulator};
    /// let acc = TiledAccumulator::new(64, 64, 1, false).unwrap();
    /// // Key block 1 sees both query blocks, key block 0 one of them.
    /// let mut m = vec![0u8; 128 * 128];
    /// for q in 0..128 { for k in 0..128 { m[q * 128 + k] = u8::from(k >= 64 || q < 64); } }
    /// let mut p = pack(&DenseMask::new(&m, &[1, 128, 128]).unwrap(), &acc,
    ///     Encoding::FragmentNative, &PackOptions::default()).unwrap();
    /// p.add_transposed(&TiledAccumulator::new(64, 64, 1, true).unwrap(), &PackOptions::default()).unwrap();
    /// let t = p.transposed().unwrap();
    /// assert_eq!(t.tile_order(), vec![1, 0]);
    /// // Not the grid's index order: a plan uploads it.
    /// assert!(!t.is_grid_tile_order(&t.tile_order()) && t.is_grid_tile_order(&[0, 1]));
    /// ```
    pub fn tile_order(&self) -> Vec<i32> {
        let counts = self.lists.tile_counts();
        crate::dispatch::tile_order(&counts, self.grid.n_blocks)
    }

    /// Whether `order` (as [`Self::tile_order`] returns) is the backward grid's own order,
    /// every plane's key tiles in index order: the kernels need no upload of it.
    pub fn is_grid_tile_order(&self, order: &[i32]) -> bool {
        crate::dispatch::is_index_order(order, self.grid.n_blocks)
    }

    /// Number of partial tiles (the forward's).
    pub fn partial_tiles(&self) -> usize {
        self.words.len() / self.layout.words_per_tile()
    }

    /// The words of transposed partial tile `tile`.
    pub fn tile_words(&self, tile: usize) -> &[u32] {
        let w = self.layout.words_per_tile();
        &self.words[tile * w..(tile + 1) * w]
    }

    /// Bytes of the four lists and the offsets (i32), and of the words.
    pub fn bytes(&self) -> (u64, u64) {
        (self.lists.bytes(), self.words.len() as u64 * 4)
    }

    /// How tile `(m_block, n_block)` of `(batch, head)` is classified by the transposed
    /// lists (batch and head broadcast when stored as 1).
    pub fn tile_class(
        &self,
        batch: usize,
        head: usize,
        n_block: usize,
        m_block: usize,
    ) -> TileClass {
        let s = self.grid.shape;
        let row = (broadcast_index(batch, s.batch) * s.heads + broadcast_index(head, s.heads))
            * self.grid.n_blocks
            + n_block;
        self.lists.tile_class(row, m_block)
    }

    /// Element `(batch, head, q, k)` decoded from the transposed lists and words alone
    /// (false outside the mask).
    pub fn get(&self, batch: usize, head: usize, q: usize, k: usize) -> bool {
        let s = self.grid.shape;
        if q >= s.seqlen_q || k >= s.seqlen_k {
            return false;
        }
        let (bm, bn) = (self.grid.block_m, self.grid.block_n);
        match self.tile_class(batch, head, k / bn, q / bm) {
            TileClass::Empty => false,
            TileClass::Full => true,
            TileClass::Partial(tile) => {
                bits::get32(self.tile_words(tile), self.layout.position(q % bm, k % bn))
            }
        }
    }

    /// Checks transposed lists and words read from a file against the (validated)
    /// forward lists and words of `packed`: the lists must be the forward lists
    /// transposed, every offset in range and used once ([`BlockLists::validate`]), and
    /// every tile's words the forward tile's bits in the backward order.
    #[cfg(feature = "std")]
    pub(crate) fn validate(&self, packed: &PackedMask) -> Result<(), MaskError> {
        let grid = &self.grid;
        let partial_tiles = packed.partial_tiles();
        if self.partial_tiles() != partial_tiles {
            return Err(MaskError::ShapeMismatch {
                what: "q_words dimension 0 (the partial tiles, as in words)",
                expected: partial_tiles as u64,
                found: self.partial_tiles() as u64,
            });
        }
        let t = transpose_lists(grid, &packed.lists, partial_tiles)?;
        let bad = |detail: &'static str| MaskError::Corrupt {
            what: "packed mask transposed tile lists",
            detail,
        };
        let mb = grid.m_blocks;
        let (expected, found) = (&t.lists, &self.lists);
        if expected.num_blocks() != found.num_blocks()
            || expected.full_num_blocks() != found.full_num_blocks()
        {
            return Err(bad(
                "a q_num_blocks / full_q_num_blocks count differs from the forward \
                 lists' (the transposed lists are not the forward lists transposed)",
            ));
        }
        for (num, expected, found) in [
            (expected.num_blocks(), expected.indices(), found.indices()),
            (
                expected.full_num_blocks(),
                expected.full_indices(),
                found.full_indices(),
            ),
        ] {
            for (row, &count) in num.iter().enumerate() {
                let range = row * mb..row * mb + count as usize;
                if expected[range.clone()] != found[range] {
                    return Err(bad(
                        "a q_indices / full_q_indices entry differs from the forward lists' \
                         (the transposed lists are not the forward lists transposed)",
                    ));
                }
            }
        }
        // The same structure as the forward lists': now only the offsets can be wrong.
        self.lists.validate(grid, partial_tiles)?;
        let derived = derive(&packed.layout, self.accumulator())?;
        let transcoder = &derived.1;
        let mut scratch = vec![0u64; transcoder.scratch_words()];
        let mut expected_words = vec![0u32; transcoder.out_words()];
        let mut k = 0usize;
        for row in 0..self.lists.rows() {
            let (_, offsets, _) = self.lists.row(row);
            for &tile in offsets {
                let forward = packed.tile_words(t.forward_tile[k] as usize);
                transcoder.run(forward, &mut scratch, &mut expected_words);
                if self.tile_words(tile as usize) != expected_words.as_slice() {
                    return Err(MaskError::Corrupt {
                        what: "packed mask transposed words",
                        detail: "a transposed tile's bits differ from the same tile's \
                                 forward words",
                    });
                }
                k += 1;
            }
        }
        Ok(())
    }
}

/// The backward layout and the transcoder from `forward` to it; with `std`, cached per
/// configuration (deriving and compiling walk the whole tile: about a millisecond,
/// noticeable against packing an 8192² mask).
#[cfg(feature = "std")]
fn derive(
    forward: &EncodedLayout,
    backward: &TiledAccumulator,
) -> Result<std::sync::Arc<(EncodedLayout, Transcoder)>, MaskError> {
    use std::sync::{Arc, Mutex, OnceLock};
    type Key = (TiledAccumulator, Encoding, TiledAccumulator);
    type Cache = Mutex<Vec<(Key, Arc<(EncodedLayout, Transcoder)>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (*forward.accumulator(), forward.encoding(), *backward);
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let lock = || {
        cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some((_, found)) = lock().iter().find(|(k, _)| *k == key) {
        return Ok(Arc::clone(found));
    }
    let layout = EncodedLayout::derive(backward, TRANSPOSED_ENCODING)?;
    let transcoder = Transcoder::new(forward, &layout)?;
    let derived = Arc::new((layout, transcoder));
    let mut entries = lock();
    if entries.len() >= 64 {
        entries.remove(0);
    }
    entries.push((key, Arc::clone(&derived)));
    Ok(derived)
}

#[cfg(not(feature = "std"))]
fn derive(
    forward: &EncodedLayout,
    backward: &TiledAccumulator,
) -> Result<alloc::boxed::Box<(EncodedLayout, Transcoder)>, MaskError> {
    let layout = EncodedLayout::derive(backward, TRANSPOSED_ENCODING)?;
    let transcoder = Transcoder::new(forward, &layout)?;
    Ok(alloc::boxed::Box::new((layout, transcoder)))
}

/// Tiles per work item of [`transcode_all`].
const TILES_PER_CHUNK: usize = 256;

/// Fills `words` (in transposed order) with every forward tile re-encoded. With
/// `std`, `threads` workers (0 = all available) draw chunks of tiles from a shared
/// counter, each written in place, as [`crate::plain_bit_pack`] schedules its bands.
fn transcode_all(
    packed: &PackedMask,
    transcoder: &Transcoder,
    forward_tile: &[u32],
    q_words: &mut [u32],
    threads: usize,
) {
    let per_tile = transcoder.out_words();
    let chunk_words = TILES_PER_CHUNK * per_tile;
    let run = |chunk: usize, out: &mut [u32], scratch: &mut [u64]| {
        let first = chunk * TILES_PER_CHUNK;
        for (k, dst) in out.chunks_exact_mut(per_tile).enumerate() {
            let src = packed.tile_words(forward_tile[first + k] as usize);
            transcoder.run(src, scratch, dst);
        }
    };
    if q_words.is_empty() {
        return;
    }
    #[cfg(feature = "std")]
    {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Mutex;
        let chunks = q_words.len().div_ceil(chunk_words);
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t,
        }
        .clamp(1, chunks.clamp(1, crate::MAX_THREADS));
        if threads > 1 {
            let slots: Vec<Mutex<Option<&mut [u32]>>> = q_words
                .chunks_mut(chunk_words)
                .map(|c| Mutex::new(Some(c)))
                .collect();
            let next = AtomicUsize::new(0);
            let work = || {
                let mut scratch = vec![0u64; transcoder.scratch_words()];
                loop {
                    let chunk = next.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = slots.get(chunk) else {
                        break;
                    };
                    let taken = slot
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .take();
                    if let Some(out) = taken {
                        run(chunk, out, &mut scratch);
                    }
                }
            };
            crate::workers::run_on_threads(threads, work);
            return;
        }
    }
    let _ = threads;
    let mut scratch = vec![0u64; transcoder.scratch_words()];
    for (chunk, out) in q_words.chunks_mut(chunk_words).enumerate() {
        run(chunk, out, &mut scratch);
    }
}
