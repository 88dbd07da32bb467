//! Word-level bit helpers: bytes (nonzero = 1) to bits, bit ranges.
//!
//! The byte-to-bit packer is the hot path of dense packing. On x86-64 it uses AVX2
//! when the CPU has it (detected at run time with `std`: `vpaddusb` + `vpmovmskb`, 32
//! bytes per instruction pair), else SSE2 (16 bytes per pair; SSE2 is part of the
//! x86-64 baseline); elsewhere an 8-bytes-at-a-time SWAR form.

/// Packs `src` (a byte per element, nonzero = 1) into bits, LSB first: bit `i % 64` of
/// `out[i / 64]` is `src[i] != 0`. The words `src` covers are overwritten (bits past
/// `src.len()` in the last one are 0); words past them are left untouched.
///
/// Panics (a caller bug, not a user-input error) if `out` is shorter than
/// `src.len().div_ceil(64)`.
///
/// ```
/// let mut out = [u64::MAX; 2];
/// fragmask_masks::bits::pack_bytes(&[1, 0, 7, 0, 0, 1], &mut out);
/// assert_eq!(out, [0b100101, u64::MAX]);
/// ```
#[inline]
pub fn pack_bytes(src: &[u8], out: &mut [u64]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was just detected on this CPU, the only requirement of the
        // target-feature function.
        unsafe { pack_bytes_avx2(src, out) };
        return;
    }
    let full = src.len() / 64;
    let (chunks, tail) = src.split_at(full * 64);
    for (word, chunk) in out.iter_mut().zip(chunks.chunks_exact(64)) {
        *word = pack64(chunk);
    }
    if !tail.is_empty() {
        out[full] = pack_tail(tail);
    }
}

/// How far ahead (bytes) [`pack_bytes`]'s AVX2 loop asks for its input stream (the
/// same distance the fused FragmentNative kernel uses for each of its two streams).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
const PREFETCH: usize = 2048;

/// [`pack_bytes`] with AVX2: two 32-byte saturating adds and masks per word.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
fn pack_bytes_avx2(src: &[u8], out: &mut [u64]) {
    use core::arch::x86_64::{
        __m256i, _mm256_adds_epu8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
        _mm_prefetch, _MM_HINT_T0,
    };
    let full = src.len() / 64;
    let (chunks, tail) = src.split_at(full * 64);
    // Adding 127 with unsigned saturation sets the top bit exactly of nonzero bytes.
    // Through `black_box`: seeing the constant, LLVM turns the add into a compare and
    // a scalar `not`, one more instruction per word.
    let top = core::hint::black_box(_mm256_set1_epi8(0x7f));
    for (word, chunk) in out.iter_mut().zip(chunks.chunks_exact(64)) {
        let p = chunk.as_ptr() as *const __m256i;
        // A hint only: never faults, whatever the address.
        _mm_prefetch::<_MM_HINT_T0>(chunk.as_ptr().wrapping_add(PREFETCH) as *const i8);
        // SAFETY: `chunk` holds 64 bytes, and the two unaligned 32-byte loads at
        // offsets 0 and 32 stay inside it (`_mm256_loadu_si256` needs no alignment).
        let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
        let b0 = _mm256_movemask_epi8(_mm256_adds_epu8(lo, top)) as u32 as u64;
        let b1 = _mm256_movemask_epi8(_mm256_adds_epu8(hi, top)) as u32 as u64;
        *word = b0 | (b1 << 32);
    }
    if !tail.is_empty() {
        out[full] = pack_tail(tail);
    }
}

/// 64 bytes to 64 bits.
#[inline(always)]
fn pack64(chunk: &[u8]) -> u64 {
    debug_assert_eq!(chunk.len(), 64);
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_setzero_si128,
        };
        // SAFETY: SSE2 is in the x86-64 baseline, so these intrinsics are always
        // available; `chunk` holds 64 bytes, and the four unaligned 16-byte loads at
        // offsets 0, 16, 32, 48 stay inside it (`_mm_loadu_si128` has no alignment
        // requirement).
        unsafe {
            let p = chunk.as_ptr() as *const __m128i;
            let zero = _mm_setzero_si128();
            let z0 = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p), zero)) as u32 as u64;
            let z1 =
                _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(1)), zero)) as u32 as u64;
            let z2 =
                _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(2)), zero)) as u32 as u64;
            let z3 =
                _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(p.add(3)), zero)) as u32 as u64;
            !(z0 | (z1 << 16) | (z2 << 32) | (z3 << 48))
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut word = 0u64;
        for (i, eight) in chunk.chunks_exact(8).enumerate() {
            word |= pack8(eight) << (8 * i);
        }
        word
    }
}

/// Up to 63 trailing bytes to bits.
#[inline]
fn pack_tail(tail: &[u8]) -> u64 {
    let mut word = 0u64;
    let whole = tail.len() / 8;
    for (i, eight) in tail[..whole * 8].chunks_exact(8).enumerate() {
        word |= pack8(eight) << (8 * i);
    }
    for (i, &byte) in tail[whole * 8..].iter().enumerate() {
        word |= ((byte != 0) as u64) << (8 * whole + i);
    }
    word
}

/// 8 bytes to 8 bits, SWAR: set the high bit of every nonzero byte, then gather the
/// eight high bits with one multiply (each partial product lands on a distinct bit, so
/// no carries disturb the top byte).
#[inline(always)]
pub(crate) fn pack8(eight: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(eight);
    let x = u64::from_le_bytes(bytes);
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let high = (((x & LOW7) + LOW7) | x) & !LOW7;
    (high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Sets bits `lo..hi` of `words` (bit `i % 64` of word `i / 64`). Empty when `lo >= hi`.
#[inline]
pub fn set_range(words: &mut [u64], lo: usize, hi: usize) {
    if lo >= hi {
        return;
    }
    let (first, last) = (lo / 64, (hi - 1) / 64);
    let lo_mask = u64::MAX << (lo % 64);
    let hi_mask = u64::MAX >> (63 - (hi - 1) % 64);
    if first == last {
        words[first] |= lo_mask & hi_mask;
        return;
    }
    words[first] |= lo_mask;
    for w in &mut words[first + 1..last] {
        *w = u64::MAX;
    }
    words[last] |= hi_mask;
}

/// Copies bits `k0..k0 + cols` of `src` to bits `0..cols` of `dst`, zeroing the rest
/// of the `ceil(cols / 64)` words written. `src` must hold bit `k0 + cols - 1`.
#[inline]
pub fn extract(src: &[u64], k0: usize, cols: usize, dst: &mut [u64]) {
    let words = cols.div_ceil(64);
    let (first, shift) = (k0 / 64, k0 % 64);
    if shift == 0 {
        // Constant-size copies for the common widths (no memcpy call per row).
        match words {
            1 => dst[0] = src[first],
            2 => {
                dst[0] = src[first];
                dst[1] = src[first + 1];
            }
            4 => dst[..4].copy_from_slice(&src[first..first + 4]),
            _ => dst[..words].copy_from_slice(&src[first..first + words]),
        }
    } else {
        for (i, d) in dst[..words].iter_mut().enumerate() {
            let lo = src[first + i] >> shift;
            let hi = src.get(first + i + 1).map_or(0, |&w| w << (64 - shift));
            *d = lo | hi;
        }
    }
    if !cols.is_multiple_of(64) {
        dst[words - 1] &= (1u64 << (cols % 64)) - 1;
    }
}

/// Bit `i` of `words`.
#[inline]
pub fn get(words: &[u64], i: usize) -> bool {
    (words[i / 64] >> (i % 64)) & 1 == 1
}

/// Bit `i` of 32-bit `words`.
#[inline]
pub fn get32(words: &[u32], i: usize) -> bool {
    (words[i / 32] >> (i % 32)) & 1 == 1
}

// The property-test configuration of the whole crate (docs/CONVENTIONS.md).
#[cfg(test)]
#[path = "../../../tests/support/proptest_ci.rs"]
pub(crate) mod proptest_ci;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec;

    proptest! {
        #![proptest_config(super::proptest_ci::config(256))]

        #[test]
        fn pack_bytes_sets_exactly_the_nonzero_bytes(src in proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..300)) {
            let words = src.len().div_ceil(64);
            let mut out = vec![u64::MAX; words + 1];
            pack_bytes(&src, &mut out);
            for (i, &b) in src.iter().enumerate() {
                prop_assert_eq!(get(&out, i), b != 0);
            }
            for i in src.len()..words * 64 {
                prop_assert!(!get(&out, i));
            }
            prop_assert_eq!(out[words], u64::MAX);
            // The baseline kernel (SSE2 or SWAR) agrees with the dispatched one.
            let mut base = vec![u64::MAX; words + 1];
            for (word, chunk) in base.iter_mut().zip(src.chunks_exact(64)) {
                *word = pack64(chunk);
            }
            if src.len() % 64 != 0 {
                base[src.len() / 64] = pack_tail(&src[src.len() / 64 * 64..]);
            }
            prop_assert_eq!(base, out);
        }

        #[test]
        fn extract_copies_exactly_the_bit_range(src in proptest::collection::vec(any::<u64>(), 1..6), k0 in 0usize..320, cols in 1usize..200) {
            let bits = src.len() * 64;
            prop_assume!(k0 + cols <= bits);
            let mut dst = vec![u64::MAX; cols.div_ceil(64) + 1];
            extract(&src, k0, cols, &mut dst);
            for i in 0..cols.div_ceil(64) * 64 {
                prop_assert_eq!(get(&dst, i), i < cols && get(&src, k0 + i));
            }
            prop_assert_eq!(dst[cols.div_ceil(64)], u64::MAX);
        }

        #[test]
        fn set_range_sets_exactly_lo_to_hi(lo in 0usize..200, len in 0usize..200) {
            let hi = (lo + len).min(256);
            let mut w = [0u64; 4];
            set_range(&mut w, lo, hi);
            for i in 0..256 {
                prop_assert_eq!(get(&w, i), i >= lo && i < hi);
            }
        }
    }
}
