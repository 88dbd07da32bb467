//! Dense bytes → FragmentNative words in one pass: the reorder fused into the byte→bit
//! step (AVX2), for the standard FA3 tile.
//!
//! For `TiledAccumulator::new(block_m, block_n, W, false)` with `block_m`, `block_n`
//! multiples of 64, `coord` (CuTe's `((4,8,4),W),((2,2,V),MMA_M)` TV layout of the
//! m64nNk16 accumulator, see `TiledAccumulator`) gives thread
//! `t = 128·wg + 32·warp + 4·quad + q` at value `i = 32·w + 4·v' + 2·h + b` the element
//!
//! - row `64·(wg + W·m) + 16·warp + quad + 8·h`, where `w = (block_n / 64)·m + span`,
//! - col `64·span + 8·v' + 2·q + b`.
//!
//! So word `w` of thread `t` is built from the rows `r` and `r + 8` and the columns
//! `[64·span, +64)`: for each 8-column group `v'` ascending, the nibble
//! `[r:2q, r:2q+1, r+8:2q, r+8:2q+1]`. [`FusedLayout::new`] checks this against the
//! table derived from `coord` (the table is the truth) and refuses any other tile.
//!
//! The kernel (`span_words`) turns 2 × 64 bytes into the 4 words of the quad lanes:
//! a saturating add puts "nonzero" in each byte's top bit (folding the load), `pshufb`
//! orders each row's column pairs by quad lane, `unpack*_epi16` interleaves the two
//! rows (each dword is then one nibble), `unpack*_epi64` + `vpermq` gather one quad
//! lane's eight groups in order, and `pmovmskb` yields the word in its final bit
//! order: 16 shuffles per 128 input bytes, against none for plain row-major packing,
//! so the kernel is shuffle-port bound (about 3× plain packing's vector instructions)
//! and is free only where packing is memory bound. Rows are read as two sequential
//! streams with software prefetch ([`PREFETCH`] bytes ahead, as plain packing does),
//! and the next line of each tile's words is prefetched before it is written.

use crate::encoding::EncodedLayout;

/// How far ahead (bytes) the kernel asks for each row stream.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
const PREFETCH: usize = 2048;

/// The FA3 structure of a FragmentNative layout, verified against its table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FusedLayout {
    block_m: usize,
    block_n: usize,
    warpgroups: usize,
    words_per_thread: usize,
    words_per_tile: usize,
}

/// Bit position predicted by the FA3 formula (module docs) for `(row, col)`.
fn predicted_position(
    row: usize,
    col: usize,
    block_n: usize,
    warpgroups: usize,
    words_per_thread: usize,
) -> usize {
    let (slab, within) = (row / 64, row % 64);
    let (warpgroup, mma_m) = (slab % warpgroups, slab / warpgroups);
    let (warp, h, quad) = (within / 16, (within % 16) / 8, within % 8);
    let (span, group, quad_lane, b) = (col / 64, (col % 64) / 8, (col % 8) / 2, col % 2);
    let thread = 128 * warpgroup + 32 * warp + 4 * quad + quad_lane;
    let word = (block_n / 64) * mma_m + span;
    (thread * words_per_thread + word) * 32 + 4 * group + 2 * h + b
}

impl FusedLayout {
    /// The fused layout of `layout`, if its table is exactly the FA3 structure of the
    /// module docs (FragmentNative, no SwapAB, one atom along N, 64-multiple tiles).
    pub(crate) fn new(layout: &EncodedLayout) -> Option<FusedLayout> {
        let acc = layout.accumulator();
        let (block_m, block_n) = (acc.block_m() as usize, acc.block_n() as usize);
        let warpgroups = acc.warpgroups() as usize;
        if block_m == 0
            || !(64..=256).contains(&block_n)
            || !block_m.is_multiple_of(64 * warpgroups)
            || !block_n.is_multiple_of(64)
        {
            return None;
        }
        let threads = 128 * warpgroups;
        let words_per_thread = (block_m / (64 * warpgroups)) * (block_n / 64);
        let words_per_tile = threads * words_per_thread;
        if layout.words_per_tile() != words_per_tile || words_per_tile * 32 != block_m * block_n {
            return None;
        }
        let positions = layout.positions();
        for row in 0..block_m {
            for col in 0..block_n {
                let p = predicted_position(row, col, block_n, warpgroups, words_per_thread);
                if positions[row * block_n + col] as usize != p {
                    return None;
                }
            }
        }
        Some(FusedLayout {
            block_m,
            block_n,
            warpgroups,
            words_per_thread,
            words_per_tile,
        })
    }

    /// Whether this CPU runs the fused kernel (AVX2, detected at run time).
    pub(crate) fn cpu_supported() -> bool {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            std::is_x86_feature_detected!("avx2")
        }
        #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
        {
            false
        }
    }

    /// Output words per tile.
    pub(crate) fn words_per_tile(&self) -> usize {
        self.words_per_tile
    }

    /// Encodes whole tiles `0..skip.len()` of one row block: `data[r * row_stride + c]`
    /// is element `(r, c)` of the block (nonzero = 1) for `r < block_m` and
    /// `c < skip.len() * block_n`; tile `n` goes to
    /// `out[n * words_per_tile..(n + 1) * words_per_tile]`, and `summary[n]` tells
    /// the tile's class: `(any, all)` with `any == 0` iff the tile is empty and
    /// `all == u32::MAX` iff it is full (every bit of a word is an element); they are
    /// the OR and the AND of the words until the tile is known partial. Tiles with
    /// `skip[n]` are neither read nor written.
    ///
    /// Returns false, writing nothing, when the CPU lacks AVX2 or the slices do not
    /// cover the tiles (the caller then takes the general path).
    pub(crate) fn encode_row_block(
        &self,
        data: &[u8],
        row_stride: usize,
        skip: &[bool],
        out: &mut [u32],
        summary: &mut [(u32, u32)],
    ) -> bool {
        let tiles = skip.len();
        let Some(cols) = tiles.checked_mul(self.block_n) else {
            return false;
        };
        let needed = (self.block_m - 1)
            .checked_mul(row_stride)
            .and_then(|n| n.checked_add(cols));
        let covered = cols <= row_stride
            && summary.len() >= tiles
            && needed.is_some_and(|n| n <= data.len())
            && tiles
                .checked_mul(self.words_per_tile)
                .is_some_and(|n| n <= out.len());
        if tiles == 0 || !covered {
            return false;
        }
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was just detected on this CPU. `covered` established that
            // every row `r < block_m` of the block holds `tiles * block_n` bytes from
            // `r * row_stride` inside `data` and that `out` holds `tiles` tiles of
            // words, which is all `encode_row_block_avx2` reads and writes.
            unsafe { self.encode_row_block_avx2(data, row_stride, skip, out, summary) };
            return true;
        }
        false
    }

    /// [`Self::encode_row_block`] after its checks.
    ///
    /// # Safety
    ///
    /// The CPU supports AVX2; `data` covers `block_m` rows of `skip.len() * block_n`
    /// bytes at stride `row_stride`; `out` holds `skip.len() * words_per_tile` words;
    /// `summary` holds at least `skip.len()` entries.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2")]
    unsafe fn encode_row_block_avx2(
        &self,
        data: &[u8],
        row_stride: usize,
        skip: &[bool],
        out: &mut [u32],
        summary: &mut [(u32, u32)],
    ) {
        // SAFETY: forwarded (the contract is the same); `new` admits 1..=4 spans.
        unsafe {
            match self.block_n / 64 {
                1 => self.encode_rows::<1>(data, row_stride, skip, out, summary),
                2 => self.encode_rows::<2>(data, row_stride, skip, out, summary),
                3 => self.encode_rows::<3>(data, row_stride, skip, out, summary),
                _ => self.encode_rows::<4>(data, row_stride, skip, out, summary),
            }
        }
    }

    /// [`Self::encode_row_block_avx2`] for `block_n = 64 × SPANS`.
    ///
    /// # Safety
    ///
    /// As [`Self::encode_row_block_avx2`], and `block_n == 64 * SPANS`.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2")]
    unsafe fn encode_rows<const SPANS: usize>(
        &self,
        data: &[u8],
        row_stride: usize,
        skip: &[bool],
        out: &mut [u32],
        summary: &mut [(u32, u32)],
    ) {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0, _MM_HINT_T0};
        debug_assert_eq!(self.block_n, 64 * SPANS);
        let wpt = self.words_per_thread;
        let summary = &mut summary[..skip.len()];
        summary.fill((0, u32::MAX));
        let constants = Constants::new();
        // Row pairs (r, r + 8) in row order, each streamed across all tiles: two
        // sequential streams (rows 0..8 and 8..16 are contiguous, and so on).
        for slab in 0..self.block_m / 64 {
            let (warpgroup, mma_m) = (slab % self.warpgroups, slab / self.warpgroups);
            for warp in 0..4 {
                for quad in 0..8 {
                    let row = 64 * slab + 16 * warp + quad;
                    let thread = 128 * warpgroup + 32 * warp + 4 * quad;
                    // Pointers advance by a tile per step; `wrapping_add` because the
                    // step past the last tile may leave the slices (they are only
                    // dereferenced inside, see below).
                    let mut row_a = data.as_ptr().wrapping_add(row * row_stride);
                    let mut row_b = row_a.wrapping_add(8 * row_stride);
                    let mut dst = out.as_mut_ptr().wrapping_add(thread * wpt + SPANS * mma_m);
                    for (&skipped, seen) in skip.iter().zip(summary.iter_mut()) {
                        if !skipped {
                            // Every other row pair starts a new 64-byte line of
                            // each tile's words: ask for the next one (the stores
                            // are scattered over the tiles, so the hardware
                            // prefetcher does not see them as a stream).
                            if quad % 2 == 0 {
                                _mm_prefetch::<_MM_HINT_ET0>(dst.wrapping_add(16) as *const i8);
                            }
                            // Once a tile has a 1 and a 0 it is partial: stop folding.
                            let (mut any, mut all) = *seen;
                            let decided = any != 0 && all != u32::MAX;
                            for span in 0..SPANS {
                                let (a, b) =
                                    (row_a.wrapping_add(64 * span), row_b.wrapping_add(64 * span));
                                // A hint only: never faults, whatever the address.
                                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(PREFETCH) as *const i8);
                                _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add(PREFETCH) as *const i8);
                                // SAFETY: for tile n, `a` is row `row` at column
                                // `n * block_n + 64 * span`, and that + 64 <=
                                // `skip.len() * block_n`, so 64 bytes of rows `row`
                                // and `row + 8 < block_m` are inside `data`; `dst +
                                // span + k * wpt` (k < 4) is word `thread + k` of the
                                // thread's `SPANS * mma_m + span < wpt` in tile n, below
                                // `(n + 1) * words_per_tile <= out.len()`; AVX2 is
                                // enabled here.
                                let [w0, w1, w2, w3] = unsafe {
                                    let words = span_words(a, b, constants);
                                    *dst.add(span) = words[0];
                                    *dst.add(wpt + span) = words[1];
                                    *dst.add(2 * wpt + span) = words[2];
                                    *dst.add(3 * wpt + span) = words[3];
                                    words
                                };
                                if !decided {
                                    any |= (w0 | w1) | (w2 | w3);
                                    all &= (w0 & w1) & (w2 & w3);
                                }
                            }
                            if !decided {
                                *seen = (any, all);
                            }
                        }
                        row_a = row_a.wrapping_add(64 * SPANS);
                        row_b = row_b.wrapping_add(64 * SPANS);
                        dst = dst.wrapping_add(self.words_per_tile);
                    }
                }
            }
        }
    }
}

/// The kernel's constant vectors, passed through `black_box` so that LLVM emits the
/// instructions written: seeing constants, its generic x86 tuning rewrites each
/// `pshufb` as `pshufd` + `pshuflw` (24 shuffles per span instead of 12) and each
/// saturating add as a compare plus a scalar `not`.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[derive(Clone, Copy)]
struct Constants {
    /// The `pshufb` mask that orders, per 128-bit lane, the column pairs `(2q, 2q+1)`
    /// of the lane's two 8-column groups g, g' as
    /// `[g q0, g' q0, g q1, g' q1, g q2, g' q2, g q3, g' q3]`.
    by_quad_lane: core::arch::x86_64::__m256i,
    /// 127 in every byte: adding it with unsigned saturation sets the top bit exactly
    /// of the nonzero bytes.
    top: core::arch::x86_64::__m256i,
}

#[cfg(all(feature = "std", target_arch = "x86_64"))]
impl Constants {
    #[target_feature(enable = "avx2")]
    fn new() -> Constants {
        use core::arch::x86_64::{_mm256_set1_epi8, _mm256_setr_epi8};
        #[rustfmt::skip]
        let by_quad_lane = _mm256_setr_epi8(
            0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
            0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
        );
        core::hint::black_box(Constants {
            by_quad_lane,
            top: _mm256_set1_epi8(0x7f),
        })
    }
}

/// The FragmentNative words of quad lanes 0..4 for 64 columns of the row pair
/// `(r, r + 8)`: `row_a` and `row_b` point at the first column of each row.
///
/// `constants` come from [`Constants::new`].
///
/// # Safety
///
/// The CPU supports AVX2, and 64 bytes are readable at `row_a` and at `row_b`.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn span_words(row_a: *const u8, row_b: *const u8, constants: Constants) -> [u32; 4] {
    use core::arch::x86_64::{
        __m256i, _mm256_adds_epu8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_permute4x64_epi64, _mm256_shuffle_epi8, _mm256_unpackhi_epi16,
        _mm256_unpackhi_epi64, _mm256_unpacklo_epi16, _mm256_unpacklo_epi64,
    };
    // SAFETY: the caller guarantees 64 readable bytes at each pointer; the loads below
    // read 32 bytes at offsets 0 and 32 (unaligned loads, no alignment needed).
    let (a0, a1, b0, b1) = unsafe {
        let a = row_a as *const __m256i;
        let b = row_b as *const __m256i;
        (
            _mm256_loadu_si256(a),
            _mm256_loadu_si256(a.add(1)),
            _mm256_loadu_si256(b),
            _mm256_loadu_si256(b.add(1)),
        )
    };
    // Top bit of each byte = element nonzero (`adds` folds the loads); the byte
    // shuffles below keep it in place, and `pmovmskb` collects it.
    let bits = |v: __m256i| {
        _mm256_shuffle_epi8(_mm256_adds_epu8(v, constants.top), constants.by_quad_lane)
    };
    let (a0, a1, b0, b1) = (bits(a0), bits(a1), bits(b0), bits(b1));
    // Interleaving the rows' pairs makes each dword one nibble
    // [r:2q, r:2q+1, r+8:2q, r+8:2q+1].
    let x01 = _mm256_unpacklo_epi16(a0, b0); // [g0q0 g1q0 g0q1 g1q1 | g2q0 g3q0 g2q1 g3q1]
    let x23 = _mm256_unpackhi_epi16(a0, b0); // [g0q2 g1q2 g0q3 g1q3 | g2q2 g3q2 g2q3 g3q3]
    let y01 = _mm256_unpacklo_epi16(a1, b1); // groups 4..8 likewise
    let y23 = _mm256_unpackhi_epi16(a1, b1);
    // Qwords [(g0 g1), (g4 g5), (g2 g3), (g6 g7)] of one quad lane, then in order.
    let ordered = |v: __m256i| _mm256_permute4x64_epi64::<0b11_01_10_00>(v);
    let word = |v: __m256i| _mm256_movemask_epi8(v) as u32;
    [
        word(ordered(_mm256_unpacklo_epi64(x01, y01))),
        word(ordered(_mm256_unpackhi_epi64(x01, y01))),
        word(ordered(_mm256_unpacklo_epi64(x23, y23))),
        word(ordered(_mm256_unpackhi_epi64(x23, y23))),
    ]
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::Encoding;
    use fragmask_gmma_frag::TiledAccumulator;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    /// `(block_m, block_n, warpgroups)` of the FA3 tiles the fused path serves.
    const FUSED: &[(u32, u32, u32)] = &[
        (128, 128, 2),
        (64, 64, 1),
        (64, 128, 1),
        (128, 64, 1),
        (192, 128, 3),
        (256, 128, 2),
        (128, 256, 2),
        (128, 192, 1),
    ];

    #[test]
    fn fused_layout_is_exactly_the_fa3_tiles() {
        for &(bm, bn, w) in FUSED {
            let acc = TiledAccumulator::new(bm, bn, w, false).unwrap();
            let layout = EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap();
            assert!(FusedLayout::new(&layout).is_some(), "{bm}x{bn}, {w} wg");
            for other in [Encoding::QuadLane, Encoding::RowMajor] {
                let layout = EncodedLayout::derive(&acc, other).unwrap();
                assert!(FusedLayout::new(&layout).is_none(), "{other:?}");
            }
        }
        for (bm, bn, w, swap) in [
            (128, 128, 2, true),
            (64, 32, 1, false),
            (128, 96, 1, false),
            (128, 64, 1, true),
        ] {
            let acc = TiledAccumulator::new(bm, bn, w, swap).unwrap();
            let layout = EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap();
            assert!(FusedLayout::new(&layout).is_none(), "{bm}x{bn} {w} {swap}");
        }
        // Two 64-wide atoms along N: value 32·atom + 4·v' + 2h + b, the same table as
        // one 128-wide atom, so it is accepted (the table decides, not the config).
        let acc = TiledAccumulator::with_atom_n(128, 128, 2, 64, false).unwrap();
        let layout = EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap();
        let one_atom = TiledAccumulator::new(128, 128, 2, false).unwrap();
        let reference = EncodedLayout::derive(&one_atom, Encoding::FragmentNative).unwrap();
        assert_eq!(layout.positions(), reference.positions());
        assert!(FusedLayout::new(&layout).is_some());
    }

    proptest! {
        #![proptest_config(crate::bits::proptest_ci::config(64))]

        /// Over random bytes (0, 1 and any other nonzero value) of a row block of whole
        /// tiles inside a wider, ragged plane, every tile's fused words equal
        /// `EncodedLayout::encode_bools`, and skipped tiles are left untouched.
        #[test]
        fn fused_avx2_packer_equals_reference_encoder(
            config in 0..FUSED.len(),
            tiles in 1usize..4,
            extra_cols in 0usize..130,
            seed in any::<u64>(),
            density in prop_oneof![Just(0u64), Just(100u64), 0u64..=100],
            skip_bits in any::<u8>(),
        ) {
            if !FusedLayout::cpu_supported() {
                std::eprintln!("SKIPPED: no AVX2 on this CPU");
                return Ok(());
            }
            let (bm, bn, w) = FUSED[config];
            let acc = TiledAccumulator::new(bm, bn, w, false).unwrap();
            let layout = EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap();
            let fused = FusedLayout::new(&layout).unwrap();
            let (bm, bn) = (bm as usize, bn as usize);
            let stride = tiles * bn + extra_cols;
            let mut state = seed;
            let mut next = || {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            };
            // The last row stops right after the tiles: reads must stay inside.
            let len = (bm - 1) * stride + tiles * bn;
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    let x = next();
                    if x % 100 < density { [1u8, 7, 0x80, 0xff][(x >> 32) as usize % 4] } else { 0 }
                })
                .collect();
            let skip: Vec<bool> = (0..tiles).map(|n| (skip_bits >> n) & 1 == 1).collect();
            let wpt = fused.words_per_tile();
            let mut out = vec![0xdead_beef_u32; tiles * wpt];
            let mut summary = vec![(1, 1); tiles];
            prop_assert!(fused.encode_row_block(&data, stride, &skip, &mut out, &mut summary));
            for n in 0..tiles {
                let words = &out[n * wpt..(n + 1) * wpt];
                if skip[n] {
                    prop_assert!(words.iter().all(|&x| x == 0xdead_beef));
                    continue;
                }
                let bools: Vec<bool> = (0..bm * bn)
                    .map(|i| data[(i / bn) * stride + n * bn + i % bn] != 0)
                    .collect();
                prop_assert_eq!(words, &layout.encode_bools(&bools)[..]);
                // The summary classifies the tile exactly.
                let (any, all) = summary[n];
                prop_assert_eq!(any == 0, words.iter().all(|&w| w == 0));
                prop_assert_eq!(all == u32::MAX, words.iter().all(|&w| w == u32::MAX));
            }
        }
    }

    #[test]
    fn short_inputs_are_refused_not_read() {
        let acc = TiledAccumulator::new(64, 64, 1, false).unwrap();
        let layout = EncodedLayout::derive(&acc, Encoding::FragmentNative).unwrap();
        let fused = FusedLayout::new(&layout).unwrap();
        let data = vec![1u8; 63 * 64 + 63];
        let mut out = vec![0u32; fused.words_per_tile()];
        let mut summary = [(0, 0)];
        assert!(!fused.encode_row_block(&data, 64, &[false], &mut out, &mut summary));
        let data = vec![1u8; 64 * 64];
        let mut short = vec![0u32; fused.words_per_tile() - 1];
        assert!(!fused.encode_row_block(&data, 64, &[false], &mut short, &mut summary));
        assert!(!fused.encode_row_block(&data, 32, &[false], &mut out, &mut summary));
        assert!(!fused.encode_row_block(&data, 64, &[false], &mut out, &mut []));
        assert!(
            fused.encode_row_block(&data, 64, &[false], &mut out, &mut summary)
                || !FusedLayout::cpu_supported()
        );
    }
}
