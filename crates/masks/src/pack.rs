//! The packer: any [`MaskSource`] → tile lists + encoded partial tiles.

use alloc::vec;
use alloc::vec::Vec;

use fragmask_gmma_frag::TiledAccumulator;

use crate::encoding::EncodedLayout;
use crate::fused::FusedLayout;
use crate::lists::{BlockLists, ListDirection};
use crate::plan::TilePlan;
use crate::shape::{broadcast_index, TileGrid};
use crate::source::{MaskSource, Region};
use crate::transpose::TransposedLists;
use crate::{bits, Documents, Encoding, MaskError, MaskShape};

/// Largest count of list entries or partial tiles (the file stores i32 indices).
pub const MAX_TILE_COUNT: u64 = i32::MAX as u64;

/// Longest `seqlen_q` and `seqlen_k` packed or read: `i32::MAX`, as attention kernels
/// (FlashAttention-3, FlexAttention, this repository's) index tokens with 32-bit ints.
pub const MAX_SEQLEN: u64 = i32::MAX as u64;

/// Most worker threads [`pack`] starts (more are treated as this many).
pub const MAX_THREADS: usize = 1024;

/// Progress of a pack: row blocks (`batch × heads × m_blocks` of them) done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackProgress {
    /// Row blocks finished.
    pub done: usize,
    /// Row blocks in all.
    pub total: usize,
}

/// Options of [`pack`].
#[derive(Clone, Copy, Default)]
pub struct PackOptions<'a> {
    /// Worker threads; 0 = all available (`std`), and always 1 without `std`.
    pub threads: usize,
    /// Called after every finished row block, from the worker threads (so it must be
    /// `Sync`); the library itself never prints.
    pub progress: Option<&'a (dyn Fn(PackProgress) + Sync)>,
}

/// How one tile was classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileClass {
    /// All zeros: skipped by the kernel.
    Empty,
    /// All `block_m × block_n` elements are 1 (never a ragged edge tile): computed
    /// without masking.
    Full,
    /// Anything else; the index of its words.
    Partial(usize),
}

/// Tile counts and ones of a packed mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileStats {
    /// Tiles in all (`B × H × m_blocks × n_blocks`).
    pub tiles: u64,
    /// Empty tiles.
    pub empty: u64,
    /// Full tiles.
    pub full: u64,
    /// Partial tiles.
    pub partial: u64,
    /// Ones of the mask (over its stored `B × H`).
    pub ones: u64,
    /// Elements of the mask (`B × H × Sq × Sk`).
    pub elements: u64,
}

impl TileStats {
    /// `ones / elements`.
    pub fn density(&self) -> f64 {
        self.ones as f64 / self.elements.max(1) as f64
    }
}

/// Byte counts of a packed mask against the alternatives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteStats {
    /// The four lists and the tile offsets (i32).
    pub lists: u64,
    /// The partial tiles' words.
    pub words: u64,
    /// A dense bool mask (one byte per element).
    pub dense_bool: u64,
    /// Plain row-major bit packing (one bit per element, rows padded to bytes).
    pub bit_packed: u64,
}

/// A packed mask: FlexAttention-style tile lists plus the encoded partial tiles.
///
/// The lists ([`BlockLists`], [`ListDirection::Forward`]) are `[B, H, m_blocks]`
/// (counts) and `[B, H, m_blocks, n_blocks]` (indices, ascending; entries past the
/// count are 0, and -1 in the tile offsets). B and H are the source's (1 when
/// broadcast).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedMask {
    pub(crate) layout: EncodedLayout,
    pub(crate) grid: TileGrid,
    pub(crate) lists: BlockLists,
    pub(crate) words: Vec<u32>,
    /// The backward pass's lists and words, when asked for
    /// ([`PackedMask::add_transposed`], [`pack_transposed`]).
    pub(crate) transposed: Option<TransposedLists>,
    /// The document boundaries, when the mask is causal or full within contiguous
    /// documents ([`MaskSource::documents`]; [`PackedMask::documents`]).
    pub(crate) documents: Option<Documents>,
}

/// Packs `source` into tile lists and encoded partial tiles.
///
/// Streams one row block (`block_m` query rows) at a time per worker: memory is the
/// lists plus the partial tiles' words, never `Sq × Sk` (unless the source itself is
/// dense). Asks the source for exact tile counts or known-empty/full regions first and
/// reads bits only for tiles that may be partial.
///
/// ```
/// use fragmask_gmma_frag::TiledAccumulator;
/// use fragmask_masks::{pack, Encoding, PackOptions, Predicate, PredicateMask};
/// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
/// let causal = PredicateMask::new(1024, 1024, Predicate::causal()).unwrap();
/// let packed = pack(&causal, &acc, Encoding::FragmentNative, &PackOptions::default()).unwrap();
/// let s = packed.stats();
/// assert_eq!((s.full, s.partial, s.empty), (28, 8, 28));
/// assert!(packed.get(0, 0, 1023, 1023) && !packed.get(0, 0, 3, 4));
/// ```
pub fn pack<S: MaskSource + ?Sized>(
    source: &S,
    acc: &TiledAccumulator,
    encoding: Encoding,
    options: &PackOptions<'_>,
) -> Result<PackedMask, MaskError> {
    let shape = source.shape();
    MaskShape::new(shape.batch, shape.heads, shape.seqlen_q, shape.seqlen_k)?;
    for (what, value) in [("seqlen_q", shape.seqlen_q), ("seqlen_k", shape.seqlen_k)] {
        if value as u64 > MAX_SEQLEN {
            return Err(MaskError::TooLarge {
                what,
                value: value as u64,
                limit: MAX_SEQLEN,
            });
        }
    }
    let grid = TileGrid::new(shape, acc);
    let entries = grid.tiles();
    if entries > MAX_TILE_COUNT {
        return Err(MaskError::TooLarge {
            what: "tile list entries (batch*heads*m_blocks*n_blocks)",
            value: entries,
            limit: MAX_TILE_COUNT,
        });
    }
    let derived = derive(acc, encoding)?;
    let (layout, plan) = (&derived.0, &derived.1);
    // <= entries (n_blocks >= 1), so no overflow.
    let strips = shape.batch * shape.heads * grid.m_blocks;
    // A dense source already holds `Sq × Sk` bytes: give every row block a slot with
    // room for all its tiles in one output buffer (at most ~1/8 of the source; pages
    // no tile reaches are never touched), so words are written once, in place.
    let slot_words = grid.n_blocks * layout.words_per_tile();
    let slots = (source.dense_rows(0, 0).is_some() && strips > 0 && slot_words > 0)
        .then(|| strips.checked_mul(slot_words))
        .flatten()
        .filter(|&total| total <= isize::MAX as usize / 8)
        .map(|total| try_vec(total, 0u32, "packed words (one slot per row block)"))
        .transpose()?
        .map(|buffer| (buffer, slot_words));
    let mut packed = match slots {
        Some((mut buffer, slot_words)) => {
            let results = run_strips(
                source,
                &grid,
                plan,
                strips,
                options,
                Some((&mut buffer, slot_words)),
            )?;
            assemble(layout.clone(), grid, results, Some((buffer, slot_words)))
        }
        None => {
            let results = run_strips(source, &grid, plan, strips, options, None)?;
            assemble(layout.clone(), grid, results, None)
        }
    }?;
    packed.documents = source
        .documents()
        .filter(|d| d.seqlen() == shape.seqlen_q && d.seqlen() == shape.seqlen_k);
    Ok(packed)
}

/// [`pack`], then [`PackedMask::add_transposed`]: the forward lists and words plus the
/// backward pass's transposed lists and words for the backward accumulator `backward`
/// (same `block_m × block_n`; [`TransposedLists::default_accumulator`] gives the
/// usual one).
///
/// ```
/// use fragmask_gmma_frag::TiledAccumulator;
/// use fragmask_masks::{pack_transposed, Encoding, PackOptions, Predicate, PredicateMask, TileClass};
/// let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
/// let bwd = TiledAccumulator::new(128, 128, 2, true).unwrap();
/// let causal = PredicateMask::new(1024, 1024, Predicate::causal()).unwrap();
/// let options = PackOptions::default();
/// let packed = pack_transposed(&causal, &acc, Encoding::FragmentNative, &bwd, &options).unwrap();
/// let t = packed.transposed().unwrap();
/// // Key block 2 is partial for query block 2 and full for query blocks 3..8.
/// assert_eq!((t.lists().num_blocks()[2], t.lists().full_num_blocks()[2]), (1, 5));
/// assert_eq!(t.tile_class(0, 0, 2, 1), TileClass::Empty);
/// assert!(t.get(0, 0, 1023, 0) && !t.get(0, 0, 3, 4));
/// ```
pub fn pack_transposed<S: MaskSource + ?Sized>(
    source: &S,
    acc: &TiledAccumulator,
    encoding: Encoding,
    backward: &TiledAccumulator,
    options: &PackOptions<'_>,
) -> Result<PackedMask, MaskError> {
    let mut packed = pack(source, acc, encoding, options)?;
    packed.add_transposed(backward, options)?;
    Ok(packed)
}

/// `len` copies of `value`, or a typed error when the memory cannot be had (instead of
/// aborting the process).
pub(crate) fn try_vec<T: Clone>(
    len: usize,
    value: T,
    what: &'static str,
) -> Result<Vec<T>, MaskError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| MaskError::OutOfMemory {
            what,
            bytes: (len as u64).saturating_mul(core::mem::size_of::<T>() as u64),
        })?;
    v.resize(len, value);
    Ok(v)
}

/// `len` zero words for an output the packer then overwrites whole, or a typed error
/// when the memory cannot be had.
///
/// Large buffers (at least [`FRESH_PAGES_BYTES`]) come from `alloc_zeroed` (fresh
/// zero pages from the system, no memset) and, on Linux, are advised as transparent
/// huge pages (`madvise(MADV_HUGEPAGE)`, a hint the kernel may ignore): writing 32 MiB
/// of fresh 4 KiB pages costs ~20 ms of page faults on the VM docs/PERF.md measures on,
/// more than re-encoding the tiles that fill them.
#[cfg(feature = "std")]
pub(crate) fn fresh_words(len: usize, what: &'static str) -> Result<Vec<u32>, MaskError> {
    let bytes = len.saturating_mul(4);
    if bytes < FRESH_PAGES_BYTES {
        return try_vec(len, 0u32, what);
    }
    let out_of_memory = MaskError::OutOfMemory {
        what,
        bytes: bytes as u64,
    };
    let layout = core::alloc::Layout::array::<u32>(len).map_err(|_| out_of_memory.clone())?;
    // SAFETY: `layout` has a non-zero size (len * 4 >= FRESH_PAGES_BYTES > 0).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut u32;
    if ptr.is_null() {
        return Err(out_of_memory);
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => 4096,
        };
        let start = (ptr as usize).next_multiple_of(page);
        let end = (ptr as usize + layout.size()) / page * page;
        if end > start {
            // SAFETY: [start, end) is page-aligned and inside the allocation just made,
            // which nothing else references; MADV_HUGEPAGE only changes how its pages
            // are backed, never their contents, and a failure leaves them as they are.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `len` u32s
    // (size len * 4, align 4), the layout a Vec<u32> of capacity `len` deallocates
    // with, and all `len` elements are initialized (zero bytes are the u32 0).
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// Without `std`: [`try_vec`].
#[cfg(not(feature = "std"))]
pub(crate) fn fresh_words(len: usize, what: &'static str) -> Result<Vec<u32>, MaskError> {
    try_vec(len, 0u32, what)
}

/// Smallest buffer [`fresh_words`] takes from fresh pages: 4 MiB.
#[cfg(feature = "std")]
const FRESH_PAGES_BYTES: usize = 4 << 20;

/// The encoding table and its compiled plan; with `std`, cached per configuration
/// (deriving walks `coord` over the whole tile: about a millisecond).
#[cfg(feature = "std")]
fn derive(
    acc: &TiledAccumulator,
    encoding: Encoding,
) -> Result<std::sync::Arc<(EncodedLayout, TilePlan)>, MaskError> {
    use std::sync::{Arc, Mutex, OnceLock};
    type Cache = Mutex<Vec<(TiledAccumulator, Encoding, Arc<(EncodedLayout, TilePlan)>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let lookup = || {
        let entries = cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries
            .iter()
            .find(|(a, e, _)| a == acc && *e == encoding)
            .map(|(_, _, d)| Arc::clone(d))
    };
    if let Some(found) = lookup() {
        return Ok(found);
    }
    let layout = EncodedLayout::derive(acc, encoding)?;
    let plan = TilePlan::new(&layout);
    let derived = Arc::new((layout, plan));
    let mut entries = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if entries.len() >= 64 {
        entries.remove(0);
    }
    entries.push((*acc, encoding, Arc::clone(&derived)));
    Ok(derived)
}

#[cfg(not(feature = "std"))]
fn derive(
    acc: &TiledAccumulator,
    encoding: Encoding,
) -> Result<alloc::boxed::Box<(EncodedLayout, TilePlan)>, MaskError> {
    let layout = EncodedLayout::derive(acc, encoding)?;
    let plan = TilePlan::new(&layout);
    Ok(alloc::boxed::Box::new((layout, plan)))
}

/// One row block's result.
struct Strip {
    partial: Vec<u32>,
    full: Vec<u32>,
    /// The partial tiles' words when the row block had no slot (else in the slot).
    words: Vec<u32>,
    /// Words kept (`partial.len() × words_per_tile`).
    len: usize,
}

/// Where a row block's words go: a growing vector, or its slot of the output buffer.
/// Words `0..len` are kept; the rest is scratch.
struct Sink<'s> {
    words: SinkWords<'s>,
    len: usize,
}

enum SinkWords<'s> {
    Own(Vec<u32>),
    Slot(&'s mut [u32]),
}

impl Sink<'_> {
    fn buffer(&mut self) -> &mut [u32] {
        match &mut self.words {
            SinkWords::Own(words) => words,
            SinkWords::Slot(slot) => slot,
        }
    }

    /// Room for `count` words after the kept ones (a slot always has room for all the
    /// row block's tiles).
    fn room(&mut self, count: usize) -> Result<&mut [u32], MaskError> {
        let end = self.len + count;
        if let SinkWords::Own(words) = &mut self.words {
            if words.len() < end {
                // Grown by doubling: few reallocations.
                let want = end.max(words.len().saturating_mul(2));
                words
                    .try_reserve(want - words.len())
                    .or_else(|_| words.try_reserve_exact(end - words.len()))
                    .map_err(|_| MaskError::OutOfMemory {
                        what: "packed words",
                        bytes: end as u64 * 4,
                    })?;
                words.resize(end, 0);
            }
        }
        let len = self.len;
        Ok(&mut self.buffer()[len..end])
    }

    /// Keeps `count` words starting at `from` (>= the kept length): moves them right
    /// after the kept words.
    fn keep(&mut self, from: usize, count: usize) {
        let len = self.len;
        if from != len {
            self.buffer().copy_within(from..from + count, len);
        }
        self.len += count;
    }
}

struct Worker<'p> {
    plan: &'p TilePlan,
    /// The fused dense path, when the plan has one and the CPU runs it.
    fused: Option<&'p FusedLayout>,
    tile: Vec<u64>,
    counts: Vec<u64>,
    /// Bits of the whole row block (`block_m × ceil(Sk / 64)`), for sources that fill
    /// rows cheaply: memory per worker ~ `block_m × Sk / 8` bytes.
    strip: Vec<u64>,
    /// What region queries said about the fused path's tiles.
    regions: Vec<Region>,
    skip: Vec<bool>,
    /// Each fused tile's class summary (`FusedLayout::encode_row_block`).
    summary: Vec<(u32, u32)>,
    /// Words of the previous strip (capacity hint).
    last_words: usize,
}

impl Worker<'_> {
    fn new(plan: &TilePlan, n_blocks: usize) -> Result<Worker<'_>, MaskError> {
        Ok(Worker {
            plan,
            fused: plan.fused().filter(|_| FusedLayout::cpu_supported()),
            tile: vec![0; plan.tile_words()],
            counts: try_vec(n_blocks, 0, "tile counts of a row block")?,
            strip: Vec::new(),
            regions: Vec::new(),
            skip: Vec::new(),
            summary: Vec::new(),
            last_words: 0,
        })
    }

    /// Packs row block `index`; its words go to `slot` when given, else to a vector.
    fn strip<S: MaskSource + ?Sized>(
        &mut self,
        source: &S,
        grid: &TileGrid,
        index: usize,
        slot: Option<&mut [u32]>,
    ) -> Result<Strip, MaskError> {
        let mut sink = Sink {
            words: match slot {
                Some(slot) => SinkWords::Slot(slot),
                // Grown by doubling from the previous strip's size.
                None => SinkWords::Own(Vec::with_capacity(self.last_words)),
            },
            len: 0,
        };
        let (partial, full) = self.strip_into(source, grid, index, &mut sink)?;
        self.last_words = sink.len;
        let words = match sink.words {
            SinkWords::Own(mut words) => {
                words.truncate(sink.len);
                words
            }
            SinkWords::Slot(_) => Vec::new(),
        };
        Ok(Strip {
            partial,
            full,
            words,
            len: sink.len,
        })
    }

    /// The fused dense path over the row block's whole tiles: the number of leading
    /// column blocks it handled (0 when it does not apply).
    #[allow(clippy::too_many_arguments)]
    fn fused_tiles<S: MaskSource + ?Sized>(
        &mut self,
        source: &S,
        grid: &TileGrid,
        (batch, head): (usize, usize),
        rows: core::ops::Range<usize>,
        sink: &mut Sink<'_>,
        partial: &mut Vec<u32>,
        full: &mut Vec<u32>,
    ) -> Result<usize, MaskError> {
        let Some(fused) = self.fused else {
            return Ok(0);
        };
        let whole = grid.shape.seqlen_k / grid.block_n;
        if rows.len() != grid.block_m || whole == 0 {
            return Ok(0);
        }
        let Some(dense) = source.dense_rows(batch, head) else {
            return Ok(0);
        };
        let Some(data) = rows
            .start
            .checked_mul(dense.row_stride)
            .and_then(|first| dense.data.get(first..))
        else {
            return Ok(0);
        };
        self.regions.clear();
        self.skip.clear();
        for n_block in 0..whole {
            let k0 = n_block * grid.block_n;
            let region = source.region(batch, head, rows.clone(), k0..k0 + grid.block_n);
            self.regions.push(region);
            self.skip.push(region != Region::Unknown);
        }
        let words_per_tile = fused.words_per_tile();
        let start = sink.len;
        let room = sink.room(whole * words_per_tile)?;
        self.summary.resize(whole, (0, 0));
        if !fused.encode_row_block(data, dense.row_stride, &self.skip, room, &mut self.summary) {
            return Ok(0);
        }
        for (n_block, (region, &(any, all))) in self.regions.iter().zip(&self.summary).enumerate() {
            match region {
                Region::Empty => {}
                Region::Full => full.push(n_block as u32),
                Region::Unknown => {
                    let from = start + n_block * words_per_tile;
                    if all == u32::MAX {
                        // Whole tile and every word is used: every element is 1.
                        full.push(n_block as u32);
                    } else if any != 0 {
                        partial.push(n_block as u32);
                        sink.keep(from, words_per_tile);
                    }
                }
            }
        }
        Ok(whole)
    }

    fn strip_into<S: MaskSource + ?Sized>(
        &mut self,
        source: &S,
        grid: &TileGrid,
        index: usize,
        sink: &mut Sink<'_>,
    ) -> Result<(Vec<u32>, Vec<u32>), MaskError> {
        let m_block = index % grid.m_blocks;
        let bh = index / grid.m_blocks;
        let (batch, head) = (bh / grid.shape.heads, bh % grid.shape.heads);
        let rows_in = grid.rows_in(m_block);
        let q0 = m_block * grid.block_m;
        let rows = q0..q0 + rows_in;
        let (mut partial, mut full) = (Vec::new(), Vec::new());
        self.counts.fill(0);
        let counted =
            source.strip_counts(batch, head, rows.clone(), grid.block_n, &mut self.counts);
        let fused = if counted {
            0
        } else {
            self.fused_tiles(
                source,
                grid,
                (batch, head),
                rows.clone(),
                sink,
                &mut partial,
                &mut full,
            )?
        };
        let strip_row_words = grid.shape.seqlen_k.div_ceil(64);
        // None = not asked yet; Some(false) = the source reads tile by tile (and the
        // ragged tile after the fused ones is read row segment by row segment).
        let mut strip_filled: Option<bool> = (fused > 0).then_some(false);
        let area = (grid.block_m * grid.block_n) as u64;
        let row_words = self.plan.row_words();
        for n_block in fused..grid.n_blocks {
            let cols_in = grid.cols_in(n_block);
            let k0 = n_block * grid.block_n;
            let whole = rows_in == grid.block_m && cols_in == grid.block_n;
            // Some(true) = known partial, None = must count.
            let known_partial = if counted {
                match self.counts[n_block] {
                    0 => continue,
                    c if c == area => {
                        full.push(n_block as u32);
                        continue;
                    }
                    _ => true,
                }
            } else {
                match source.region(batch, head, rows.clone(), k0..k0 + cols_in) {
                    Region::Empty => continue,
                    Region::Full if whole => {
                        full.push(n_block as u32);
                        continue;
                    }
                    // Every in-bounds element is 1 but the tile is ragged: partial.
                    Region::Full => true,
                    Region::Unknown => false,
                }
            };
            if strip_filled.is_none() {
                // A strip of bits costs `block_m × Sk / 8` bytes: only for sources that
                // fill it, and beyond MAX_SPARSE_STRIP_WORDS only for dense sources
                // (whose own row block is 8 times larger); others are read tile by tile.
                let strip_words = rows_in * strip_row_words;
                let use_strip = source.fills_strips()
                    && (strip_words <= MAX_SPARSE_STRIP_WORDS
                        || source.dense_rows(batch, head).is_some());
                strip_filled = Some(
                    use_strip && {
                        self.strip.resize(strip_words, 0);
                        source.strip_bits(batch, head, rows.clone(), &mut self.strip)
                    },
                );
            }
            self.tile.fill(0);
            match strip_filled {
                Some(true) if grid.block_n.is_multiple_of(64) => {
                    // Word-aligned tile (block_n a multiple of 64): plain word copies.
                    // Strip bits past Sk are 0, and words past the row read as 0.
                    let first = k0 / 64;
                    let take = row_words.min(strip_row_words - first);
                    for r in 0..rows_in {
                        let src = &self.strip[r * strip_row_words + first..][..take];
                        let dst = &mut self.tile[r * row_words..][..take];
                        for (d, s) in dst.iter_mut().zip(src) {
                            *d = *s;
                        }
                    }
                }
                Some(true) => {
                    for r in 0..rows_in {
                        bits::extract(
                            &self.strip[r * strip_row_words..(r + 1) * strip_row_words],
                            k0,
                            cols_in,
                            &mut self.tile[r * row_words..(r + 1) * row_words],
                        );
                    }
                }
                _ => {
                    for r in 0..rows_in {
                        source.row_bits(
                            batch,
                            head,
                            q0 + r,
                            k0,
                            cols_in,
                            &mut self.tile[r * row_words..(r + 1) * row_words],
                        );
                    }
                }
            }
            if !known_partial {
                // Empty iff no bit is set; full iff whole and every bit is set.
                let any = self.tile.iter().fold(0, |acc, w| acc | w);
                if any == 0 {
                    continue;
                }
                if whole && all_ones(&self.tile, row_words, grid.block_n) {
                    full.push(n_block as u32);
                    continue;
                }
            }
            partial.push(n_block as u32);
            let words_per_tile = self.plan.words_per_tile();
            let len = sink.len;
            self.plan.encode(&mut self.tile, sink.room(words_per_tile)?);
            sink.keep(len, words_per_tile);
        }
        Ok((partial, full))
    }
}

/// Whether every one of the `block_n` bits of every row of `tile` is set.
fn all_ones(tile: &[u64], row_words: usize, block_n: usize) -> bool {
    let last = match block_n % 64 {
        0 => u64::MAX,
        r => (1u64 << r) - 1,
    };
    if last == u64::MAX {
        return tile.iter().fold(u64::MAX, |acc, w| acc & w) == u64::MAX;
    }
    tile.chunks_exact(row_words).all(|row| {
        row[..row_words - 1].iter().all(|&w| w == u64::MAX) && row[row_words - 1] == last
    })
}

/// Largest strip of bits (`u64` words, 16 MiB) built for a source that is not dense.
const MAX_SPARSE_STRIP_WORDS: usize = 1 << 21;

/// The output buffer of a dense source and its slot length (words per row block).
type Slots<'b> = Option<(&'b mut [u32], usize)>;

#[cfg(feature = "std")]
fn run_strips<S: MaskSource + ?Sized>(
    source: &S,
    grid: &TileGrid,
    plan: &TilePlan,
    strips: usize,
    options: &PackOptions<'_>,
    slots: Slots<'_>,
) -> Result<Vec<Strip>, MaskError> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    }
    .clamp(1, strips.clamp(1, MAX_THREADS));
    if threads == 1 {
        return run_serial(source, grid, plan, strips, options, slots);
    }
    // Each row block's slot, taken by whichever worker draws the row block.
    let slots: Vec<Mutex<Option<&mut [u32]>>> = match slots {
        Some((buffer, slot_words)) => buffer
            .chunks_mut(slot_words)
            .map(|slot| Mutex::new(Some(slot)))
            .collect(),
        None => Vec::new(),
    };
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    // Workers draw row blocks from `next` until none is left or one worker failed.
    let work = || -> Result<Vec<(usize, Strip)>, MaskError> {
        let mut worker = Worker::new(plan, grid.n_blocks)?;
        let mut mine = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let index = next.fetch_add(1, Ordering::Relaxed);
            if index >= strips {
                break;
            }
            let slot = slots.get(index).and_then(|slot| {
                slot.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .take()
            });
            match worker.strip(source, grid, index, slot) {
                Ok(strip) => mine.push((index, strip)),
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
            let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
            if let Some(progress) = options.progress {
                progress(PackProgress {
                    done: finished,
                    total: strips,
                });
            }
        }
        Ok(mine)
    };
    let parts: Vec<Result<Vec<(usize, Strip)>, MaskError>> = std::thread::scope(|scope| {
        // The calling thread is one of the workers; a helper thread the system refuses
        // to start is simply one worker fewer (the others draw its row blocks).
        let helpers: Vec<_> = (1..threads)
            .map_while(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut parts = vec![work()];
        parts.extend(helpers.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }));
        parts
    });
    let mut all: Vec<(usize, Strip)> = Vec::with_capacity(strips);
    for part in parts {
        all.extend(part?);
    }
    all.sort_unstable_by_key(|(index, _)| *index);
    Ok(all.into_iter().map(|(_, strip)| strip).collect())
}

#[cfg(not(feature = "std"))]
fn run_strips<S: MaskSource + ?Sized>(
    source: &S,
    grid: &TileGrid,
    plan: &TilePlan,
    strips: usize,
    options: &PackOptions<'_>,
    slots: Slots<'_>,
) -> Result<Vec<Strip>, MaskError> {
    run_serial(source, grid, plan, strips, options, slots)
}

fn run_serial<S: MaskSource + ?Sized>(
    source: &S,
    grid: &TileGrid,
    plan: &TilePlan,
    strips: usize,
    options: &PackOptions<'_>,
    slots: Slots<'_>,
) -> Result<Vec<Strip>, MaskError> {
    let mut worker = Worker::new(plan, grid.n_blocks)?;
    let mut slots = slots.map(|(buffer, slot_words)| buffer.chunks_mut(slot_words));
    (0..strips)
        .map(|index| {
            let slot = slots.as_mut().and_then(|chunks| chunks.next());
            let strip = worker.strip(source, grid, index, slot)?;
            if let Some(progress) = options.progress {
                progress(PackProgress {
                    done: index + 1,
                    total: strips,
                });
            }
            Ok(strip)
        })
        .collect()
}

/// Builds the lists and the words: `buffer` (with its slot length) holds the row
/// blocks' words in their slots when the source was dense; they are moved down over
/// the unused room (nothing moves while every earlier tile was partial).
fn assemble(
    layout: EncodedLayout,
    grid: TileGrid,
    strips: Vec<Strip>,
    buffer: Option<(Vec<u32>, usize)>,
) -> Result<PackedMask, MaskError> {
    let n_blocks = grid.n_blocks;
    let count = strips.len();
    let partial_tiles: usize = strips.iter().map(|s| s.partial.len()).sum();
    if partial_tiles as u64 > MAX_TILE_COUNT {
        return Err(MaskError::TooLarge {
            what: "partial tiles",
            value: partial_tiles as u64,
            limit: MAX_TILE_COUNT,
        });
    }
    let words = match buffer {
        Some((mut words, slot_words)) => {
            let mut end = 0;
            for (index, strip) in strips.iter().enumerate() {
                let from = index * slot_words;
                if from != end {
                    words.copy_within(from..from + strip.len, end);
                }
                end += strip.len;
            }
            words.truncate(end);
            words.shrink_to_fit();
            words
        }
        None => {
            let mut words = Vec::new();
            let total = partial_tiles * layout.words_per_tile();
            words
                .try_reserve_exact(total)
                .map_err(|_| MaskError::OutOfMemory {
                    what: "packed words",
                    bytes: total as u64 * 4,
                })?;
            for strip in &strips {
                words.extend_from_slice(&strip.words);
            }
            words
        }
    };
    let mut lists = BlockLists::empty(ListDirection::Forward, count, n_blocks)?;
    let (num, indices, full_num, full_indices, offsets) = lists.parts_mut();
    let mut tile = 0usize;
    for (index, strip) in strips.into_iter().enumerate() {
        let row = index * n_blocks;
        num[index] = strip.partial.len() as i32;
        full_num[index] = strip.full.len() as i32;
        for (j, &n) in strip.partial.iter().enumerate() {
            indices[row + j] = n as i32;
            offsets[row + j] = (tile + j) as i32;
        }
        for (j, &n) in strip.full.iter().enumerate() {
            full_indices[row + j] = n as i32;
        }
        tile += strip.partial.len();
    }
    let packed = PackedMask {
        grid,
        lists,
        words,
        layout,
        transposed: None,
        documents: None,
    };
    Ok(packed)
}

impl PackedMask {
    /// Builds (or rebuilds) the backward pass's transposed lists and words for the
    /// backward accumulator `backward`, which must have this mask's `block_m × block_n`
    /// (module `transpose`; docs/masks.md). Works on any packed mask, a file read
    /// without them included. `options.threads` workers re-encode the tiles;
    /// `options.progress` is not called.
    pub fn add_transposed(
        &mut self,
        backward: &TiledAccumulator,
        options: &PackOptions<'_>,
    ) -> Result<(), MaskError> {
        self.check_backward_tile(backward)?;
        self.transposed = Some(TransposedLists::build(self, backward, options.threads)?);
        Ok(())
    }

    /// `backward` must have this mask's `block_m × block_n`.
    fn check_backward_tile(&self, backward: &TiledAccumulator) -> Result<(), MaskError> {
        let acc = self.accumulator();
        for (what, expected, found) in [
            (
                "block_m of the backward accumulator (must equal the forward tile's)",
                acc.block_m(),
                backward.block_m(),
            ),
            (
                "block_n of the backward accumulator (must equal the forward tile's)",
                acc.block_n(),
                backward.block_n(),
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
        Ok(())
    }

    /// Attaches transposed lists and words another builder produced (the GPU packer,
    /// say), validated as a file's are: `lists` transposed ([`ListDirection::Transposed`],
    /// `[B, H, n_blocks]` and `[B, H, n_blocks, m_blocks]` row-major); `words` the
    /// partial tiles' words in the order of the backward accumulator `backward` (same
    /// `block_m × block_n`). Validation re-encodes every tile on the CPU, so it costs
    /// about what [`Self::add_transposed`] does.
    #[cfg(feature = "std")]
    pub fn attach_transposed(
        &mut self,
        backward: &TiledAccumulator,
        lists: BlockLists,
        words: Vec<u32>,
    ) -> Result<(), MaskError> {
        self.check_backward_tile(backward)?;
        let layout = EncodedLayout::derive(backward, crate::TRANSPOSED_ENCODING)?;
        if lists.direction() != ListDirection::Transposed {
            return Err(MaskError::Unsupported {
                what: "transposed lists",
                detail: "the lists given are the forward lists (kv_*), not the transposed (q_*)",
            });
        }
        let rows = self.lists.rows() / self.grid.m_blocks.max(1) * self.grid.n_blocks;
        let lists = BlockLists::new(
            ListDirection::Transposed,
            rows,
            self.grid.m_blocks,
            lists.into_parts(),
        )?;
        let expected_words = self.partial_tiles() * layout.words_per_tile();
        if words.len() != expected_words {
            return Err(MaskError::ShapeMismatch {
                what: "q_words (partial tiles x the backward words per tile)",
                expected: expected_words as u64,
                found: words.len() as u64,
            });
        }
        let transposed = TransposedLists {
            layout,
            grid: self.grid,
            lists,
            words,
        };
        transposed.validate(self)?;
        self.transposed = Some(transposed);
        Ok(())
    }

    /// The backward pass's transposed lists, or [`MaskError::NoTransposedLists`] when
    /// the mask was packed without them (they are added by `fragmask pack
    /// --transposed`).
    pub fn transposed(&self) -> Result<&TransposedLists, MaskError> {
        self.transposed.as_ref().ok_or(MaskError::NoTransposedLists)
    }

    /// Whether the transposed lists are present.
    pub fn has_transposed(&self) -> bool {
        self.transposed.is_some()
    }

    /// Drops the transposed lists (a forward-only mask, as format version 1 stored).
    pub fn drop_transposed(&mut self) {
        self.transposed = None;
    }

    /// The document boundaries when the mask is causal or full within contiguous
    /// documents, the same in every batch and head (kept by [`pack`] from
    /// [`MaskSource::documents`] and by the packed file): a forward may then walk each
    /// document on its own grid instead of these lists.
    pub fn documents(&self) -> Option<&Documents> {
        self.documents.as_ref()
    }

    /// Attaches document boundaries after checking that they make exactly this mask:
    /// the tile lists ([`Documents::check_lists`]) and every element of every partial
    /// tile's words (a forward on the documents grid computes the documents' mask, so it
    /// must be the one the lists and words hold).
    pub fn attach_documents(&mut self, documents: Documents) -> Result<(), MaskError> {
        documents.check_lists(&self.grid, &self.lists)?;
        let s = self.grid.shape;
        let (bm, bn) = (self.grid.block_m, self.grid.block_n);
        let [num, indices, _, _, offsets] = self.lists.parts();
        for (row, &count) in num.iter().enumerate() {
            let m_block = row % self.grid.m_blocks;
            let base = row * self.grid.n_blocks;
            for j in 0..count.max(0) as usize {
                let (n_block, tile) = (indices[base + j] as usize, offsets[base + j] as usize);
                let words = self.tile_words(tile);
                for q in m_block * bm..((m_block + 1) * bm).min(s.seqlen_q) {
                    for k in n_block * bn..((n_block + 1) * bn).min(s.seqlen_k) {
                        let p = self.layout.position(q % bm, k % bn);
                        if bits::get32(words, p) != documents.is_visible(q, k) {
                            return Err(MaskError::Corrupt {
                                what: "packed mask documents",
                                detail: "a partial tile's words disagree with the document \
                                         boundaries",
                            });
                        }
                    }
                }
            }
        }
        self.documents = Some(documents);
        Ok(())
    }

    /// Forgets the document boundaries (the lists stay).
    pub fn drop_documents(&mut self) {
        self.documents = None;
    }

    /// The tile configuration.
    pub fn accumulator(&self) -> &TiledAccumulator {
        self.layout.accumulator()
    }

    /// The encoding of the words.
    pub fn encoding(&self) -> Encoding {
        self.layout.encoding()
    }

    /// The encoding's derived bit positions.
    pub fn layout(&self) -> &EncodedLayout {
        &self.layout
    }

    /// The mask's shape (B, H as stored: 1 when broadcast).
    pub fn shape(&self) -> MaskShape {
        self.grid.shape
    }

    /// The tile grid.
    pub fn grid(&self) -> &TileGrid {
        &self.grid
    }

    /// The forward tile lists: per `(batch, head, m_block)` row, the partial and full
    /// `n_block`s and the partial tiles' indices into [`Self::words`]
    /// (FlexAttention's `kv_num_blocks`, `kv_indices`, `full_kv_num_blocks`,
    /// `full_kv_indices`, and `kv_tile_offsets`).
    pub fn lists(&self) -> &BlockLists {
        &self.lists
    }

    /// The forward's dispatch order of the row blocks ([`crate::row_order`] of the key tiles
    /// each forward row visits, partial and full): `[B, H, m_blocks]` of the stored
    /// (broadcast) planes.
    pub fn row_order(&self) -> Vec<i32> {
        let counts = self.lists.tile_counts();
        crate::dispatch::row_order(&counts, self.grid.m_blocks)
    }

    /// Whether `order` (as [`Self::row_order`] returns) is the forward grid's own order
    /// without counts, every plane from its last row block down: the kernels need no
    /// upload of it.
    pub fn is_grid_row_order(&self, order: &[i32]) -> bool {
        crate::dispatch::is_last_row_first(order, self.grid.m_blocks)
    }

    /// All partial tiles' words, `[partial_tiles, ...word_shape]`.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Number of partial tiles.
    pub fn partial_tiles(&self) -> usize {
        self.words.len() / self.layout.words_per_tile()
    }

    /// The words of partial tile `tile`.
    pub fn tile_words(&self, tile: usize) -> &[u32] {
        let w = self.layout.words_per_tile();
        &self.words[tile * w..(tile + 1) * w]
    }

    fn row_block(&self, batch: usize, head: usize, m_block: usize) -> usize {
        let s = self.grid.shape;
        (broadcast_index(batch, s.batch) * s.heads + broadcast_index(head, s.heads))
            * self.grid.m_blocks
            + m_block
    }

    /// How tile `(m_block, n_block)` of `(batch, head)` was classified (batch and head
    /// broadcast when stored as 1).
    pub fn tile_class(
        &self,
        batch: usize,
        head: usize,
        m_block: usize,
        n_block: usize,
    ) -> TileClass {
        self.lists
            .tile_class(self.row_block(batch, head, m_block), n_block)
    }

    /// Element `(batch, head, q, k)` decoded from the lists and words (false outside
    /// the mask).
    pub fn get(&self, batch: usize, head: usize, q: usize, k: usize) -> bool {
        let s = self.grid.shape;
        if q >= s.seqlen_q || k >= s.seqlen_k {
            return false;
        }
        let (bm, bn) = (self.grid.block_m, self.grid.block_n);
        match self.tile_class(batch, head, q / bm, k / bn) {
            TileClass::Empty => false,
            TileClass::Full => true,
            TileClass::Partial(tile) => {
                let p = self.layout.position(q % bm, k % bn);
                bits::get32(self.tile_words(tile), p)
            }
        }
    }

    /// The whole `(batch, head)` plane decoded, `Sq × Sk` bools row-major (tests and
    /// small masks).
    pub fn decode_plane(&self, batch: usize, head: usize) -> Vec<bool> {
        let s = self.grid.shape;
        let (bm, bn) = (self.grid.block_m, self.grid.block_n);
        let mut plane = vec![false; s.seqlen_q * s.seqlen_k];
        for m in 0..self.grid.m_blocks {
            for n in 0..self.grid.n_blocks {
                let class = self.tile_class(batch, head, m, n);
                for r in 0..self.grid.rows_in(m) {
                    for c in 0..self.grid.cols_in(n) {
                        plane[(m * bm + r) * s.seqlen_k + n * bn + c] = match class {
                            TileClass::Empty => false,
                            TileClass::Full => true,
                            TileClass::Partial(tile) => {
                                bits::get32(self.tile_words(tile), self.layout.position(r, c))
                            }
                        };
                    }
                }
            }
        }
        plane
    }

    /// Tile counts and ones.
    pub fn stats(&self) -> TileStats {
        let full = self.lists.full_tiles();
        let partial = self.partial_tiles() as u64;
        let tiles = self.grid.tiles();
        let area = (self.grid.block_m * self.grid.block_n) as u64;
        let partial_ones: u64 = self.words.iter().map(|w| w.count_ones() as u64).sum();
        TileStats {
            tiles,
            empty: tiles - full - partial,
            full,
            partial,
            ones: full * area + partial_ones,
            elements: self.grid.shape.elements(),
        }
    }

    /// Bytes of this packing against a dense bool mask and plain bit packing.
    pub fn bytes(&self) -> ByteStats {
        let s = self.grid.shape;
        ByteStats {
            lists: self.lists.bytes(),
            words: self.words.len() as u64 * 4,
            dense_bool: s.elements(),
            bit_packed: (s.batch * s.heads * s.seqlen_q) as u64 * s.seqlen_k.div_ceil(8) as u64,
        }
    }
}

/// Rows per work item of [`plain_bit_pack`]: the packer's row blocks at `block_m = 128`.
const PLAIN_BAND_ROWS: usize = 128;

/// Plain row-major bit packing of a dense `rows × cols` byte mask (nonzero = 1): each
/// row padded to whole u64 words. The baseline the packer's benchmark compares with.
///
/// It is scheduled as [`pack`] is: with `std`, `threads` workers (0 = all available)
/// draw bands of 128 rows from a shared counter, each band written in place into its
/// part of the output; a band is one [`bits::pack_bytes`] call (AVX2 when detected)
/// when `cols` is a multiple of 64, else one call per row.
///
/// Panics (a caller bug) if `data` is shorter than `rows × cols`.
pub fn plain_bit_pack(data: &[u8], rows: usize, cols: usize, threads: usize) -> Vec<u64> {
    let row_words = cols.div_ceil(64);
    let mut out = vec![0u64; rows * row_words];
    if rows == 0 || row_words == 0 {
        return out;
    }
    let band_words = PLAIN_BAND_ROWS * row_words;
    let pack_band = |band: usize, dst: &mut [u64]| {
        let first = band * PLAIN_BAND_ROWS;
        let count = dst.len() / row_words;
        if cols.is_multiple_of(64) {
            bits::pack_bytes(&data[first * cols..(first + count) * cols], dst);
        } else {
            for (i, row) in dst.chunks_exact_mut(row_words).enumerate() {
                let r = first + i;
                bits::pack_bytes(&data[r * cols..(r + 1) * cols], row);
            }
        }
    };
    #[cfg(feature = "std")]
    {
        let bands = rows.div_ceil(PLAIN_BAND_ROWS);
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Mutex;
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t,
        }
        .clamp(1, bands.clamp(1, MAX_THREADS));
        if threads > 1 {
            let slots: Vec<Mutex<Option<&mut [u64]>>> = out
                .chunks_mut(band_words)
                .map(|band| Mutex::new(Some(band)))
                .collect();
            let next = AtomicUsize::new(0);
            let work = || loop {
                let band = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = slots.get(band) else {
                    break;
                };
                let taken = slot
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .take();
                if let Some(dst) = taken {
                    pack_band(band, dst);
                }
            };
            crate::workers::run_on_threads(threads, work);
            return out;
        }
    }
    let _ = threads;
    for (band, dst) in out.chunks_mut(band_words).enumerate() {
        pack_band(band, dst);
    }
    out
}
