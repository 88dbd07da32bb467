//! The attention kernel's block mask is a [`fragmask_masks::PackedMask`], the file
//! `fragmask pack` writes (docs/masks.md): FlexAttention-style tile lists plus the
//! FragmentNative words of the partial tiles, for one of the kernel's tile geometries
//! (`Geometry`: 128 x 128 over two consumer warpgroups, 64 x 64 over one, ...; no SwapAB).
//! The geometry of a call with a mask is the mask's tile.
//!
//! This module checks that a packed mask matches the kernel's geometry and the call's
//! shape, and packs any [`MaskSource`] with the masks crate's packer. The kernel reads:
//! - `kv_num_blocks` / `kv_indices` and `full_kv_num_blocks` / `full_kv_indices`
//!   (`[B, H, Mb]`, `[B, H, Mb, Nb]`; only entries below the counts);
//! - `kv_tile_offsets` for the `j`-th partial tile (entries past the count are -1 and
//!   never read);
//! - `words` u32 `[tiles, consumer threads, words]`: bit `b` of word `w` of consumer thread `t` is the
//!   element that thread holds at fragment value `32w + b` (docs/architecture.md
//!   facts 1 and 7).
//!
//! Tile classes (masks::pack): a tile is full only when all of its elements exist and
//! are visible, so a ragged edge tile is never full; elements past `seqlen_q` /
//! `seqlen_k` are 0 in the words. The kernel applies the key bound to any tile reaching
//! past `seqlen_k` and never stores rows past `seqlen_q`.

use std::ops::Range;

use fragmask_kernels::attention::Geometry;
use fragmask_masks::{
    pack, Encoding, MaskShape, MaskSource, PackOptions, PackedMask, Region, TiledAccumulator,
};

use super::{AttentionError, AttentionShape};

/// Most elements (`batch * heads * seqlen_q * seqlen_k`) a dense or synthetic mask may
/// have: 2^36 (a 256k x 256k plane). A synthetic mask evaluates a hash per element, so
/// larger masks are refused rather than packed for hours.
pub const MAX_PACK_ELEMENTS: u64 = 1 << 36;

/// The encoding of the kernel's words.
pub const KERNEL_ENCODING: Encoding = Encoding::FragmentNative;

/// Words per partial tile of `geometry`: consumer threads x words per thread.
pub fn words_per_tile(geometry: &Geometry) -> usize {
    (geometry.mask_threads() * geometry.mask_words_per_thread()) as usize
}

/// The tile a mask for `geometry` is packed at ([`Geometry::mask_geometry`]: a
/// shared-K/V geometry's query blocks each read a 64x64 mask tile): `block_m x block_n`
/// over its consumer warpgroups, no SwapAB.
pub fn kernel_accumulator(geometry: &Geometry) -> Result<TiledAccumulator, AttentionError> {
    let geometry = geometry.mask_geometry();
    TiledAccumulator::new(
        geometry.block_m(),
        geometry.block_n(),
        geometry.consumer_warpgroups(),
        false,
    )
    .map_err(|e| AttentionError::Masks(e.into()))
}

/// The kernel geometry of a packed mask's tile: a supported geometry with the mask's
/// `block_m x block_n` and warpgroups, FragmentNative and no SwapAB; else the error names
/// the first field that differs from the nearest supported tile.
pub fn mask_geometry(mask: &PackedMask) -> Result<Geometry, AttentionError> {
    let acc = mask.accumulator();
    let geometry = Geometry::from_tile(acc.block_m(), acc.block_n(), acc.warpgroups())
        .map_err(AttentionError::Config)?;
    check_kernel_layout(mask, &geometry)?;
    Ok(geometry)
}

/// Checks that `mask` was packed for `geometry`'s tile and the kernel's encoding; the
/// error names the first field that differs.
pub fn check_kernel_layout(mask: &PackedMask, geometry: &Geometry) -> Result<(), AttentionError> {
    let kernel = kernel_accumulator(geometry)?;
    let acc = mask.accumulator();
    let fields = [
        (
            "encoding",
            mask.encoding().name().to_string(),
            KERNEL_ENCODING.name().to_string(),
        ),
        (
            "block_m",
            acc.block_m().to_string(),
            kernel.block_m().to_string(),
        ),
        (
            "block_n",
            acc.block_n().to_string(),
            kernel.block_n().to_string(),
        ),
        (
            "warpgroups",
            acc.warpgroups().to_string(),
            kernel.warpgroups().to_string(),
        ),
        (
            "swap_ab",
            acc.swap_ab().to_string(),
            kernel.swap_ab().to_string(),
        ),
        (
            "wgmma atom N",
            acc.mma_n().to_string(),
            kernel.mma_n().to_string(),
        ),
        (
            "words per tile",
            mask.layout().words_per_tile().to_string(),
            words_per_tile(geometry).to_string(),
        ),
    ];
    for (field, found, expected) in fields {
        if found != expected {
            return Err(AttentionError::MaskLayout {
                field,
                found,
                expected,
            });
        }
    }
    if *acc != kernel {
        return Err(AttentionError::MaskLayout {
            field: "tile configuration",
            found: format!("{acc:?}"),
            expected: format!("{kernel:?}"),
        });
    }
    Ok(())
}

/// Checks that `mask` fits a call of `shape`: built for its `Sq`, `Sk`, and batch and
/// heads 1 (broadcast) or equal to the call's.
pub fn check_fits(mask: &PackedMask, shape: &AttentionShape) -> Result<(), AttentionError> {
    let m = mask.shape();
    if m.seqlen_q != shape.seqlen_q || m.seqlen_k != shape.seqlen_k {
        return Err(AttentionError::Mask(format!(
            "mask built for Sq={} Sk={}, attention has Sq={} Sk={}",
            m.seqlen_q, m.seqlen_k, shape.seqlen_q, shape.seqlen_k
        )));
    }
    if !(m.batch == 1 || m.batch == shape.batch) || !(m.heads == 1 || m.heads == shape.heads) {
        return Err(AttentionError::Mask(format!(
            "mask batch x heads {}x{} must be 1 or equal to {}x{}",
            m.batch, m.heads, shape.batch, shape.heads
        )));
    }
    Ok(())
}

/// Checks that a dense or synthetic mask of these extents may be packed: positive and
/// at most [`MAX_PACK_ELEMENTS`] elements.
pub fn check_pack_size(
    batch: usize,
    heads: usize,
    seqlen_q: usize,
    seqlen_k: usize,
) -> Result<(), AttentionError> {
    if batch == 0 || heads == 0 || seqlen_q == 0 || seqlen_k == 0 {
        return Err(AttentionError::Mask("mask extents must be positive".into()));
    }
    let elements = [batch, heads, seqlen_q, seqlen_k]
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    match elements {
        Some(n) if n <= MAX_PACK_ELEMENTS => Ok(()),
        _ => Err(AttentionError::Mask(format!(
            "{batch}x{heads}x{seqlen_q}x{seqlen_k} elements to pack; the limit is {MAX_PACK_ELEMENTS}"
        ))),
    }
}

/// Packs `source` for the kernel's `geometry` with the masks crate's packer (all cores).
pub fn pack_for_kernel<S: MaskSource + ?Sized>(
    source: &S,
    geometry: &Geometry,
) -> Result<PackedMask, AttentionError> {
    let acc = kernel_accumulator(geometry)?;
    pack(source, &acc, KERNEL_ENCODING, &PackOptions::default()).map_err(AttentionError::Masks)
}

/// A mask source from a visibility function `visible(b, h, i, j)` over `shape`
/// (`b < shape.batch`, `h < shape.heads`), with an optional region oracle that lets the
/// packer skip tiles it knows are empty or full.
pub struct FnMask<F, R = fn(usize, usize, Range<usize>, Range<usize>) -> Region> {
    shape: MaskShape,
    visible: F,
    region: Option<R>,
}

impl<F> FnMask<F>
where
    F: Fn(usize, usize, usize, usize) -> bool + Sync,
{
    /// A source that reads every element through `visible`.
    pub fn new(shape: MaskShape, visible: F) -> Self {
        FnMask {
            shape,
            visible,
            region: None,
        }
    }
}

impl<F, R> FnMask<F, R>
where
    F: Fn(usize, usize, usize, usize) -> bool + Sync,
    R: Fn(usize, usize, Range<usize>, Range<usize>) -> Region + Sync,
{
    /// A source with a region oracle: `region(b, h, rows, cols)` must return `Empty` /
    /// `Full` only when every element of the rectangle is 0 / 1.
    pub fn with_region(shape: MaskShape, visible: F, region: R) -> Self {
        FnMask {
            shape,
            visible,
            region: Some(region),
        }
    }
}

impl<F, R> MaskSource for FnMask<F, R>
where
    F: Fn(usize, usize, usize, usize) -> bool + Sync,
    R: Fn(usize, usize, Range<usize>, Range<usize>) -> Region + Sync,
{
    fn shape(&self) -> MaskShape {
        self.shape
    }

    fn row_bits(
        &self,
        batch: usize,
        head: usize,
        q: usize,
        k0: usize,
        cols: usize,
        out: &mut [u64],
    ) {
        for i in 0..cols {
            if (self.visible)(batch, head, q, k0 + i) {
                out[i / 64] |= 1 << (i % 64);
            }
        }
    }

    fn region(&self, batch: usize, head: usize, rows: Range<usize>, cols: Range<usize>) -> Region {
        match &self.region {
            Some(region) => region(batch, head, rows, cols),
            None => Region::Unknown,
        }
    }
}

/// The former attention packer (predicate -> tiles, one element at a time), kept as the
/// test reference of [`pack_for_kernel`].
/// The 128 x 128 geometry's numbers, for the reference packer and the tests.
#[cfg(test)]
mod tile128 {
    use fragmask_kernels::attention::Geometry;
    pub const GEOMETRY: Geometry = Geometry::TILE_128X128;
    pub const BLOCK_M: u32 = GEOMETRY.block_m();
    pub const BLOCK_N: u32 = GEOMETRY.block_n();
    pub const MASK_THREADS: u32 = GEOMETRY.mask_threads();
    pub const MASK_WORDS_PER_THREAD: u32 = GEOMETRY.mask_words_per_thread();
    pub const WORDS_PER_TILE: usize = (MASK_THREADS * MASK_WORDS_PER_THREAD) as usize;
}

#[cfg(test)]
pub(crate) mod reference_packer {
    use super::tile128::*;

    /// `(consumer thread, value)` of every element of a 128 x 128 tile, row-major, from
    /// the PTX formula of the wgmma m64nNk16 accumulator (docs/architecture.md fact 1),
    /// independent of gmma-frag and the masks crate: warpgroup `t / 128` owns rows
    /// `64 * (t / 128)..`.
    pub(crate) fn tile_owner_table() -> Vec<(u16, u8)> {
        let (bm, bn) = (BLOCK_M as usize, BLOCK_N as usize);
        let mut table = vec![(u16::MAX, 0u8); bm * bn];
        for ct in 0..MASK_THREADS as usize {
            let (wg, t) = (ct / 128, ct % 128);
            for i in 0..(bn / 2) {
                let row = 64 * wg + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
                let col = 8 * (i / 4) + 2 * (t % 4) + (i % 2);
                table[row * bn + col] = (ct as u16, i as u8);
            }
        }
        table
    }

    /// The reference packer's output (the former `BlockMask`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct ReferenceMask {
        pub batch: usize,
        pub heads: usize,
        pub seqlen_q: usize,
        pub seqlen_k: usize,
        pub kv_num_blocks: Vec<i32>,
        pub kv_indices: Vec<i32>,
        pub full_kv_num_blocks: Vec<i32>,
        pub full_kv_indices: Vec<i32>,
        pub kv_tile_offsets: Vec<i32>,
        pub words: Vec<u32>,
    }

    /// Packs `visible(b, h, i, j)`: tiles with no visible element are skipped, tiles
    /// whose in-range elements are all visible are full (a ragged edge tile included),
    /// list entries past the counts are 0 (`kv_tile_offsets` too).
    pub(crate) fn pack_reference(
        batch: usize,
        heads: usize,
        seqlen_q: usize,
        seqlen_k: usize,
        visible: impl Fn(usize, usize, usize, usize) -> bool,
    ) -> ReferenceMask {
        let (bm, bn) = (BLOCK_M as usize, BLOCK_N as usize);
        let (mb, nb) = (seqlen_q.div_ceil(bm), seqlen_k.div_ceil(bn));
        let owners = tile_owner_table();
        let rows = batch * heads * mb;
        let mut mask = ReferenceMask {
            batch,
            heads,
            seqlen_q,
            seqlen_k,
            kv_num_blocks: vec![0; rows],
            kv_indices: vec![0; rows * nb],
            full_kv_num_blocks: vec![0; rows],
            full_kv_indices: vec![0; rows * nb],
            kv_tile_offsets: vec![0; rows * nb],
            words: Vec::new(),
        };
        let words_per_thread = MASK_WORDS_PER_THREAD as usize;
        let mut tile_words = vec![0u32; WORDS_PER_TILE];
        for b in 0..batch {
            for h in 0..heads {
                for m in 0..mb {
                    let row = (b * heads + h) * mb + m;
                    let (mut partial, mut full) = (0usize, 0usize);
                    for n in 0..nb {
                        tile_words.iter_mut().for_each(|w| *w = 0);
                        let rows_in = (seqlen_q - m * bm).min(bm);
                        let cols_in = (seqlen_k - n * bn).min(bn);
                        let mut count = 0usize;
                        for r in 0..rows_in {
                            for c in 0..cols_in {
                                if visible(b, h, m * bm + r, n * bn + c) {
                                    count += 1;
                                    let (ct, value) = owners[r * bn + c];
                                    let word = ct as usize * words_per_thread + value as usize / 32;
                                    tile_words[word] |= 1 << (value % 32);
                                }
                            }
                        }
                        if count == 0 {
                            continue;
                        }
                        if count == rows_in * cols_in {
                            mask.full_kv_indices[row * nb + full] = n as i32;
                            full += 1;
                        } else {
                            let tile = mask.words.len() / WORDS_PER_TILE;
                            mask.kv_indices[row * nb + partial] = n as i32;
                            mask.kv_tile_offsets[row * nb + partial] = tile as i32;
                            mask.words.extend_from_slice(&tile_words);
                            partial += 1;
                        }
                    }
                    mask.kv_num_blocks[row] = partial as i32;
                    mask.full_kv_num_blocks[row] = full as i32;
                }
            }
        }
        mask
    }

    /// How the reference classified a tile (`Some(words)` for partial).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum RefClass<'a> {
        Empty,
        Full,
        Partial(&'a [u32]),
    }

    impl ReferenceMask {
        pub(crate) fn class(&self, b: usize, h: usize, m: usize, n: usize) -> RefClass<'_> {
            let mb = self.seqlen_q.div_ceil(BLOCK_M as usize);
            let nb = self.seqlen_k.div_ceil(BLOCK_N as usize);
            let row = (b * self.heads + h) * mb + m;
            let list = row * nb;
            let np = self.kv_num_blocks[row] as usize;
            if let Some(p) = self.kv_indices[list..list + np]
                .iter()
                .position(|&x| x == n as i32)
            {
                let t = self.kv_tile_offsets[list + p] as usize;
                return RefClass::Partial(
                    &self.words[t * WORDS_PER_TILE..(t + 1) * WORDS_PER_TILE],
                );
            }
            let nf = self.full_kv_num_blocks[row] as usize;
            if self.full_kv_indices[list..list + nf].contains(&(n as i32)) {
                RefClass::Full
            } else {
                RefClass::Empty
            }
        }
    }
}

#[cfg(test)]
use super::proptest_ci;

#[cfg(test)]
mod tests {
    use super::reference_packer::{pack_reference, tile_owner_table, RefClass, ReferenceMask};
    use super::tile128::*;
    use super::*;
    use fragmask_masks::{DenseMask, TileClass};
    use proptest::prelude::*;

    #[test]
    fn owner_table_is_a_bijection_onto_thread_value_pairs() {
        let t = tile_owner_table();
        let mut seen = vec![false; t.len()];
        for &(ct, v) in &t {
            let k = ct as usize * 64 + v as usize;
            assert!(!seen[k]);
            seen[k] = true;
        }
        // docs/architecture.md fact 1 at thread 5 of warpgroup 1, value 6: row 64 + 1 + 8, col 8 + 2.
        assert_eq!(t[(64 + 9) * 128 + 10], (128 + 5, 6));
    }

    #[test]
    fn fragment_native_bit_of_each_element_is_its_owners_register_slot() {
        // The kernel loads word w of thread t and tests bit b for its value 32w + b
        // (kernels' MASK_BLOCKS): the masks crate's FragmentNative position must be
        // 64 t + value for every element.
        let acc = kernel_accumulator(&GEOMETRY).unwrap();
        let layout = fragmask_masks::EncodedLayout::derive(&acc, KERNEL_ENCODING).unwrap();
        assert_eq!(layout.words_per_tile(), WORDS_PER_TILE);
        let owners = tile_owner_table();
        for r in 0..BLOCK_M as usize {
            for c in 0..BLOCK_N as usize {
                let (ct, value) = owners[r * BLOCK_N as usize + c];
                assert_eq!(
                    layout.position(r, c),
                    ct as usize * 64 + value as usize,
                    "({r}, {c})"
                );
            }
        }
    }

    fn dense_pack(b: usize, h: usize, sq: usize, sk: usize, bits: &[u8]) -> PackedMask {
        pack_for_kernel(&DenseMask::new(bits, &[b, h, sq, sk]).unwrap(), &GEOMETRY).unwrap()
    }

    /// The in-range elements of tile (m, n) as FragmentNative words.
    fn in_range_words(sq: usize, sk: usize, m: usize, n: usize) -> Vec<u32> {
        let owners = tile_owner_table();
        let (bm, bn) = (BLOCK_M as usize, BLOCK_N as usize);
        let mut words = vec![0u32; WORDS_PER_TILE];
        for r in 0..(sq - m * bm).min(bm) {
            for c in 0..(sk - n * bn).min(bn) {
                let (ct, v) = owners[r * bn + c];
                words[ct as usize * 2 + v as usize / 32] |= 1 << (v % 32);
            }
        }
        words
    }

    /// Compares the fast packer with the reference tile for tile, bit for bit. The one
    /// allowed difference: a ragged edge tile whose existing elements are all visible is
    /// full in the reference and partial (every existing bit set) in masks::pack.
    fn assert_same_tiles(fast: &PackedMask, reference: &ReferenceMask) -> Result<(), String> {
        let s = fast.shape();
        let grid = fast.grid();
        for b in 0..s.batch {
            for h in 0..s.heads {
                for m in 0..grid.m_blocks {
                    for n in 0..grid.n_blocks {
                        let ragged =
                            grid.rows_in(m) != grid.block_m || grid.cols_in(n) != grid.block_n;
                        let ok = match (fast.tile_class(b, h, m, n), reference.class(b, h, m, n)) {
                            (TileClass::Empty, RefClass::Empty) => true,
                            (TileClass::Full, RefClass::Full) => !ragged,
                            (TileClass::Partial(t), RefClass::Partial(words)) => {
                                fast.tile_words(t) == words
                            }
                            (TileClass::Partial(t), RefClass::Full) => {
                                ragged
                                    && fast.tile_words(t)
                                        == in_range_words(s.seqlen_q, s.seqlen_k, m, n)
                            }
                            _ => false,
                        };
                        if !ok {
                            return Err(format!(
                                "{}x{}x{}x{} tile (b {b}, h {h}, m {m}, n {n}): fast {:?}, reference {:?}",
                                s.batch,
                                s.heads,
                                s.seqlen_q,
                                s.seqlen_k,
                                fast.tile_class(b, h, m, n),
                                reference.class(b, h, m, n)
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn edge_tiles_and_list_padding_differ_from_the_reference_packer_as_documented() {
        // 130 x 200: tiles (0,1), (1,0), (1,1) are ragged. Everything visible.
        let (sq, sk) = (130, 200);
        let ones = vec![1u8; sq * sk];
        let fast = dense_pack(1, 1, sq, sk, &ones);
        let reference = pack_reference(1, 1, sq, sk, |_, _, _, _| true);
        // The reference calls every tile full; masks::pack only the whole tile (0, 0).
        assert_eq!(reference.full_kv_num_blocks, vec![2, 2]);
        assert_eq!(reference.kv_num_blocks, vec![0, 0]);
        assert_eq!(fast.lists().full_num_blocks(), &[1, 0]);
        assert_eq!(fast.lists().num_blocks(), &[1, 2]);
        assert_eq!(fast.tile_class(0, 0, 0, 0), TileClass::Full);
        for (m, n) in [(0, 1), (1, 0), (1, 1)] {
            let TileClass::Partial(t) = fast.tile_class(0, 0, m, n) else {
                panic!("ragged tile ({m}, {n}) is not partial");
            };
            assert_eq!(fast.tile_words(t), &in_range_words(sq, sk, m, n)[..]);
        }
        // Padding past the counts: kv_tile_offsets -1 in masks::pack, 0 in the reference;
        // the index lists 0 in both. The kernel reads offsets only below kv_num_blocks.
        assert_eq!(fast.lists().tile_offsets(), &[0, -1, 1, 2]);
        assert_eq!(reference.kv_tile_offsets, vec![0, 0, 0, 0]);
        assert_eq!(fast.lists().full_indices(), &[0, 0, 0, 0]);
        assert_eq!(fast.lists().indices(), &[1, 0, 0, 1]);
        assert_same_tiles(&fast, &reference).unwrap();

        // A ragged tile with a hole stays partial in both, with the same words.
        let holed: Vec<u8> = (0..sq * sk)
            .map(|i| u8::from(i != 129 * sk + 199))
            .collect();
        let fast = dense_pack(1, 1, sq, sk, &holed);
        let reference = pack_reference(1, 1, sq, sk, |_, _, i, j| !(i == 129 && j == 199));
        assert!(matches!(reference.class(0, 0, 1, 1), RefClass::Partial(_)));
        assert_same_tiles(&fast, &reference).unwrap();
    }

    /// Lengths around the tile edges (1, 127..129, 255..257) and a few others.
    fn edge_len() -> impl Strategy<Value = usize> {
        prop_oneof![
            prop::sample::select(vec![1usize, 2, 64, 127, 128, 129, 255, 256, 257]),
            1usize..=300,
        ]
    }

    #[derive(Debug, Clone)]
    enum Pattern {
        /// Each element kept with probability `keep / 8`.
        Random { keep: u8, seed: u64 },
        /// Whole 128-blocks forced on / off / random, so every tile class appears.
        Blocks { seed: u64 },
    }

    fn pattern() -> impl Strategy<Value = Pattern> {
        prop_oneof![
            (0u8..=8, any::<u64>()).prop_map(|(keep, seed)| Pattern::Random { keep, seed }),
            any::<u64>().prop_map(|seed| Pattern::Blocks { seed }),
        ]
    }

    fn mix(seed: u64, x: usize) -> u64 {
        let mut z = seed ^ (x as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn dense_bits(b: usize, h: usize, sq: usize, sk: usize, p: &Pattern) -> Vec<u8> {
        (0..b * h * sq * sk)
            .map(|idx| {
                let (j, i) = (idx % sk, (idx / sk) % sq);
                let bh = idx / (sq * sk);
                u8::from(match *p {
                    Pattern::Random { keep, seed } => mix(seed, idx) % 8 < u64::from(keep),
                    Pattern::Blocks { seed } => {
                        match mix(seed, bh * 4096 + (i / 128) * 64 + j / 128) % 3 {
                            0 => mix(seed ^ 1, idx) % 3 == 0,
                            1 => true,
                            _ => false,
                        }
                    }
                })
            })
            .collect()
    }

    proptest! {
        #![proptest_config(proptest_ci::config(24))]

        #[test]
        fn fast_packer_equals_the_reference_packer_tile_for_tile(
            b in 1usize..=2,
            h in 1usize..=2,
            sq in edge_len(),
            sk in edge_len(),
            p in pattern(),
        ) {
            let bits = dense_bits(b, h, sq, sk, &p);
            let at = |bb: usize, hh: usize, i: usize, j: usize| bits[((bb * h + hh) * sq + i) * sk + j] != 0;
            let reference = pack_reference(b, h, sq, sk, at);
            // The dense fast path (fused AVX2 where available) and the predicate path.
            let dense = dense_pack(b, h, sq, sk, &bits);
            let shape = MaskShape::new(b, h, sq, sk).unwrap();
            let by_fn = pack_for_kernel(&FnMask::new(shape, at), &GEOMETRY).unwrap();
            prop_assert_eq!(&dense, &by_fn);
            if let Err(e) = assert_same_tiles(&dense, &reference) {
                return Err(TestCaseError::fail(e));
            }
            // And the kernel check accepts it.
            check_kernel_layout(&dense, &GEOMETRY).unwrap();
            assert_eq!(mask_geometry(&dense).unwrap(), GEOMETRY);
        }
    }

    #[test]
    fn other_tiles_and_encodings_are_refused_naming_the_field() {
        let bits = vec![1u8; 64 * 64];
        let dense = DenseMask::new(&bits, &[64, 64]).unwrap();
        let cases = [
            (
                TiledAccumulator::new(64, 128, 1, false).unwrap(),
                KERNEL_ENCODING,
                "block_m",
            ),
            (
                TiledAccumulator::new(128, 64, 2, false).unwrap(),
                KERNEL_ENCODING,
                "block_n",
            ),
            (
                kernel_accumulator(&GEOMETRY).unwrap(),
                Encoding::RowMajor,
                "encoding",
            ),
        ];
        for (acc, encoding, field) in cases {
            let m = pack(&dense, &acc, encoding, &PackOptions::default()).unwrap();
            let e = check_kernel_layout(&m, &GEOMETRY).unwrap_err();
            assert!(
                matches!(&e, AttentionError::MaskLayout { field: f, .. } if *f == field),
                "{e}"
            );
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    #[test]
    fn a_mask_picks_its_geometry_and_unsupported_tiles_list_the_supported_ones() {
        let bits = vec![1u8; 256 * 256];
        let dense = DenseMask::new(&bits, &[256, 256]).unwrap();
        let at = |m, n, w| {
            let acc = TiledAccumulator::new(m, n, w, false).unwrap();
            pack(&dense, &acc, KERNEL_ENCODING, &PackOptions::default()).unwrap()
        };
        assert_eq!(mask_geometry(&at(64, 64, 1)).unwrap(), Geometry::TILE_64X64);
        assert_eq!(
            mask_geometry(&at(128, 80, 2)).unwrap(),
            Geometry::TILE_128X80
        );
        let e = mask_geometry(&at(64, 128, 1)).unwrap_err().to_string();
        assert!(e.contains("64x128") && e.contains("64x64 (1 wg)"), "{e}");
    }

    #[test]
    fn masks_for_another_call_are_refused() {
        let bits = vec![1u8; 2 * 100 * 50];
        let m = dense_pack(1, 2, 100, 50, &bits);
        let shape = |batch, heads, seqlen_q, seqlen_k| AttentionShape {
            batch,
            heads,
            kv_heads: 1,
            seqlen_q,
            seqlen_k,
            head_dim: 64,
        };
        check_fits(&m, &shape(3, 2, 100, 50)).unwrap();
        let e = check_fits(&m, &shape(1, 2, 100, 51)).unwrap_err();
        assert!(e.to_string().contains("mask built for Sq=100 Sk=50"), "{e}");
        let e = check_fits(&m, &shape(1, 4, 100, 50)).unwrap_err();
        assert!(e.to_string().contains("must be 1 or equal"), "{e}");
        assert!(check_pack_size(1, 1, 1 << 18, 1 << 18).is_ok());
        assert!(check_pack_size(1, 2, 1 << 18, 1 << 18).is_err());
        assert!(check_pack_size(usize::MAX, 2, 2, 2).is_err());
    }
}
