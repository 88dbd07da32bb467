//! The mask apply component of the wgmma kernels: scores a thread may not see become
//! `-inf`, on partial steps only (docs/architecture.md §3, "mask"). Each text defines
//! `fm_apply_mask` for one fragment orientation and one mask source:
//!
//! - [`ROW_BLOCK_WINDOW`], [`ROW_BLOCK_WORDS`]: the forward's `S` (rows are queries,
//!   `$LAYOUT_S`), window bounds (rows and keys counted from the schedule's row 0, the
//!   keys bounded by `$KEY_BOUND`, the schedule's `Placement::key_bound`) or
//!   FragmentNative words ([`row_block_words`] loads them; [`ROW_BLOCK_WORDS`] also
//!   defines `fm_mask_bias`, which writes them into S as its starting value before QK^T,
//!   and `fm_apply_key_bound`, all that is left after the GEMM then);
//! - [`KEY_TILE_WINDOW`], [`KEY_TILE_WORDS`]: the backward's `Sᵀ` (rows are keys,
//!   `$LAYOUT_ST`), window bounds or the transposed FragmentNative words.
//!
//! The index expressions (`$VALUE_COL_S`, `$VALUE_ROW_SLOT_ST`, ...) are the fragment
//! component's (`family::fragment`), filled in by the kernel with the layout's name.

use std::fmt::Write as _;

use super::fragment::FragmentMap;
use super::LayoutError;

/// The forward's window mask: per row slot, one visible column interval.
pub const ROW_BLOCK_WINDOW: &str = r#"// ---- mask application: window mode ----
// Values of S outside the window, past the key bound ($KEY_BOUND) or in a missing slot become -inf (only called on
// partial steps).
__device__ __forceinline__ void fm_apply_mask(float (&s)[$S_VALUES], const fm_attn_params& p, const fm_schedule& sched,
                                              const fm_tile& t, const fm_mask_bits& bits, int frag_row, int frag_col) {
#pragma unroll
    for (int h = 0; h < FM_STEP_BLOCKS; ++h) {
        const long long n0 = (long long)t.n_block[h] * FM_BLOCK_N;
        int col_lo[2], col_hi[2];   // visible column range of this thread's two rows, relative to n0 + frag_col
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            // $LAYOUT_S: row slot r is row frag_row + $ROW_SLOT_STRIDE * r
            const long long row = (long long)sched.m0 + frag_row + $ROW_SLOT_STRIDE * r;
            const long long base = n0 + frag_col;
            long long lo = p.window_left >= $WINDOW_INFINITE ? -1 : row + p.diag_offset - p.window_left - base;
            long long hi = p.window_right >= $WINDOW_INFINITE ? (long long)$KEY_BOUND - 1 - base
                                                             : row + p.diag_offset + p.window_right - base;
            hi = min(hi, (long long)$KEY_BOUND - 1 - base);
            if (t.n_block[h] < 0) hi = -(1LL << 20);   // missing slot: nothing visible
            col_lo[r] = (int)max(min(lo, 1LL << 20), -(1LL << 20));
            col_hi[r] = (int)max(min(hi, 1LL << 20), -(1LL << 20));
        }
#pragma unroll
        for (int i = h * FM_BLOCK_VALUES; i < (h + 1) * FM_BLOCK_VALUES; ++i) {
            // $LAYOUT_S value mode: column offset $VALUE_COL_S (slot h's block starts at column h * FM_BLOCK_N),
            // row slot $VALUE_ROW_SLOT_S
            const int c = $VALUE_COL_S - h * FM_BLOCK_N;
            const int r = $VALUE_ROW_SLOT_S;
            if (c < col_lo[r] || c > col_hi[r]) s[i] = FM_NEG_INF;
        }
    }
}
"#;

/// The forward's FragmentNative mask: one bit per value, plus the key bound of the last block.
///
/// Two ways to meet a step: `fm_apply_mask`, the select pass on S after QK^T (then the key
/// bound, `fm_apply_key_bound`); or `fm_mask_bias` before QK^T is issued, which writes the
/// words into S as its starting value (0 where the bit is set, `-inf` where it is not) for
/// the first k-step to accumulate onto (scale-d 1): a masked score is `-inf` when the GEMM
/// completes (`-inf` plus a finite product), and only `fm_apply_key_bound` runs after it.
pub const ROW_BLOCK_WORDS: &str = r#"// ---- mask application: FragmentNative words ----
// Consumer thread ct = 128*wg + lt holds the $S_VALUES values of $LAYOUT_S. Slot h's values are
// h*FM_BLOCK_VALUES .. (h+1)*FM_BLOCK_VALUES-1, in the register order of the mask tile's own accumulator
// (checked by the generator); bit b of word w of slot h is the mask bit of its value 32*w + b, loaded by
// fm_load_mask_bits.
// Key bound of the last block (TMA zero-fills K past seqlen_k; those scores must not count).
__device__ __forceinline__ void fm_apply_key_bound(float (&s)[$S_VALUES], const fm_attn_params& p, const fm_tile& t,
                                                   int frag_col) {
#pragma unroll
    for (int h = 0; h < FM_STEP_BLOCKS; ++h) {
        const long long n0 = (long long)t.n_block[h] * FM_BLOCK_N;
        if (t.n_block[h] >= 0 && n0 + FM_BLOCK_N > (long long)p.seqlen_k) {
            const int cols_left = p.seqlen_k - (int)n0 - frag_col;
#pragma unroll
            for (int i = h * FM_BLOCK_VALUES; i < (h + 1) * FM_BLOCK_VALUES; ++i) {
                if ($VALUE_COL_S - h * FM_BLOCK_N >= cols_left) s[i] = FM_NEG_INF;   // $LAYOUT_S value column
            }
        }
    }
}
// The select pass after QK^T: a cleared bit's value becomes -inf.
__device__ __forceinline__ void fm_apply_mask(float (&s)[$S_VALUES], const fm_attn_params& p, const fm_schedule& sched,
                                              const fm_tile& t, const fm_mask_bits& bits, int frag_row, int frag_col) {
#pragma unroll
    for (int i = 0; i < $S_VALUES; ++i) {
        // FragmentNative order: value i <-> slot i / FM_BLOCK_VALUES, bit (i % 32) of that slot's word (i % FM_BLOCK_VALUES) / 32
        const int h = i / FM_BLOCK_VALUES;
        const unsigned word = bits.w[h * $MASK_WORDS + (i % FM_BLOCK_VALUES) / 32];
        if (((word >> (i % 32)) & 1u) == 0u) s[i] = FM_NEG_INF;
    }
    fm_apply_key_bound(s, p, t, frag_col);
}
// The mask as S's starting value, written before QK^T is issued (S is dead then: P was converted): 0 where the
// bit is set, -inf where it is not. Returns the first k-step's scale-d: 1 (QK^T accumulates onto the bias, so a
// masked score is -inf + a finite product = -inf) on partial steps, 0 (QK^T overwrites S) on the others.
__device__ __forceinline__ void fm_write_mask_bias(float (&s)[$S_VALUES], const fm_mask_bits& bits) {
#pragma unroll
    for (int i = 0; i < $S_VALUES; ++i) {
        // FragmentNative order, as in fm_apply_mask
        const int h = i / FM_BLOCK_VALUES;
        const unsigned word = bits.w[h * $MASK_WORDS + (i % FM_BLOCK_VALUES) / 32];
        s[i] = ((word >> (i % 32)) & 1u) != 0u ? 0.f : FM_NEG_INF;
    }
}
__device__ __forceinline__ int fm_mask_bias(float (&s)[$S_VALUES], const fm_tile& t, const fm_mask_bits& bits) {
    if (!t.partial) return 0;
    fm_write_mask_bias(s, bits);
    return 1;
}
// The next step's bias, written as soon as this step's P is converted. No branch: ptxas can then interleave the
// selects with the softmax's exp2s instead of running them between P's conversion and the next QK^T's issue. A
// step that is not partial gets the bias too, and its QK^T overwrites it (scale-d 0).
__device__ __forceinline__ int fm_mask_bias_ahead(float (&s)[$S_VALUES], const fm_tile& t, const fm_mask_bits& bits) {
    fm_write_mask_bias(s, bits);
    return t.partial ? 1 : 0;
}
"#;

/// The backward's window mask on `Sᵀ`: per key row slot, one visible query interval.
///
/// `$KEY_BOUND` and `$QUERY_BOUNDS` are the walk's (`family::schedule::key_tile::KeyGrid::mask_values`):
/// the call's keys, or a document's keys and queries.
pub const KEY_TILE_WINDOW: &str = r#"// Values of S^T outside the window or past seqlen_k become -inf (partial steps only). Per row slot r (key
// key_row + $ROW_SLOT_STRIDE * r) the visible queries are one interval, taken relative to this thread's first
// query column and clamped to int, so each value costs two integer compares.
__device__ __forceinline__ void fm_apply_mask(float (&s)[$ST_VALUES], const fm_bwd_params& p, const fm_schedule& sched,
                                              const fm_step& t, unsigned word, int key_row, int q_col) {
    int lo[2], hi[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const long long key = (long long)sched.n0 + key_row + $ROW_SLOT_STRIDE * r;
        const long long base = (long long)t.m * FM_STEP_M + q_col;   // query of column offset 0
        long long l = p.window_right >= $WINDOW_INFINITE ? -1 : key - p.diag_offset - p.window_right - base;
        long long h = p.window_left >= $WINDOW_INFINITE ? (1LL << 20) : key - p.diag_offset + p.window_left - base;
        if (key >= $KEY_BOUND) h = -(1LL << 20);   // key past the end: nothing visible
$QUERY_BOUNDS        lo[r] = (int)max(min(l, 1LL << 20), -(1LL << 20));
        hi[r] = (int)max(min(h, 1LL << 20), -(1LL << 20));
    }
#pragma unroll
    for (int i = 0; i < $ST_VALUES; ++i) {
        // $LAYOUT_ST value mode: row slot $VALUE_ROW_SLOT_ST, query column offset $VALUE_COL_ST
        const int c = $VALUE_COL_ST;
        const int r = $VALUE_ROW_SLOT_ST;
        if (c < lo[r] || c > hi[r]) s[i] = FM_NEG_INF;
    }
}
"#;

/// The backward's FragmentNative mask on `Sᵀ`: bit `i % 32` of word `i / 32` of the step's
/// words is value i. A 64-query step has one word a thread (`unsigned`), a 128-query step
/// two (`uint2`: `x` holds values 0..31, `y` values 32..63); [`key_tile_word_values`] fills
/// `$MASK_WORD_T`, `$MASK_WORD_ALL` and `$MASK_WORD_OF_VALUE`, and `$KEY_BOUND_CLEAR` is
/// [`key_bound_clear`]'s text.
pub const KEY_TILE_WORDS: &str = r#"// Bit i % 32 of word i / 32 of this thread's words of the step ($MASK_WORD_T) is value i of S^T (the generator
// checked the correspondence with the mask's backward accumulator for every thread and value). Keys past seqlen_k
// are masked too: fm_key_keep, once per walk, clears the bits of their row slots, and each step's words are ANDed
// with it, so that each value is one bit test and one select (R2P and FSEL).
__device__ __forceinline__ $MASK_WORD_T fm_key_keep(const fm_bwd_params& p, const fm_schedule& sched, int key_row) {
    $MASK_WORD_T w = $MASK_WORD_ALL;
    const int key0 = sched.n0 + key_row;   // $LAYOUT_ST row slot 0's key
$KEY_BOUND_CLEAR    return w;
}

__device__ __forceinline__ void fm_apply_mask(float (&s)[$ST_VALUES], const fm_bwd_params& p, const fm_schedule& sched,
                                              const fm_step& t, $MASK_WORD_T word, int key_row, int q_col) {
#pragma unroll
    for (int i = 0; i < $ST_VALUES; ++i)
        if ((($MASK_WORD_OF_VALUE >> (i % 32)) & 1u) == 0u) s[i] = FM_NEG_INF;
}
"#;

/// The values of [`KEY_TILE_WORDS`]' word placeholders for a thread's `values` of `Sᵀ`:
/// one word (at most 32 values) or two (at most 64).
pub fn key_tile_word_values(values: u32) -> Result<Vec<(&'static str, String)>, LayoutError> {
    let (ty, all, of_value) = match values.div_ceil(32) {
        1 => ("unsigned", "0xffffffffu", "word"),
        2 => (
            "uint2",
            "make_uint2(0xffffffffu, 0xffffffffu)",
            "(i < 32 ? word.x : word.y)",
        ),
        _ => {
            return Err(LayoutError(format!(
                "{values} values per thread do not fit one or two 32-bit mask words"
            )))
        }
    };
    Ok(vec![
        ("MASK_WORD_T", ty.to_string()),
        ("MASK_WORD_ALL", all.to_string()),
        ("MASK_WORD_OF_VALUE", of_value.to_string()),
    ])
}

/// The key bound of [`KEY_TILE_WORDS`]: for each row slot of
/// `st` (a thread's values lie in rows `key_row + slot row`), one line that clears the bits
/// of that slot's values from the word `w` (32 values), or from `w.x` and `w.y` (64), when
/// its key is past `seqlen_k`. The masks come from the layout.
pub fn key_bound_clear(st: &FragmentMap, indent: &str) -> Result<String, LayoutError> {
    let words = st.values().div_ceil(32);
    if !(1..=2).contains(&words) {
        return Err(LayoutError(format!(
            "{} values per thread do not fit one or two 32-bit mask words",
            st.values()
        )));
    }
    let mut out = String::new();
    for (slot, row) in st.row_slots().iter().enumerate() {
        let bits = |w: u32| {
            (32 * w..(32 * w + 32).min(st.values()))
                .filter(|&v| st.value_row_slot(v) == slot)
                .fold(0u32, |m, v| m | (1 << (v % 32)))
        };
        let clear = if words == 1 {
            format!("w &= ~0x{:08x}u;", bits(0))
        } else {
            format!(
                "{{ w.x &= ~0x{:08x}u; w.y &= ~0x{:08x}u; }}",
                bits(0),
                bits(1)
            )
        };
        let _ = writeln!(
            out,
            "{indent}if (key0 + {row} >= p.seqlen_k) {clear}   // row slot {slot}: its values' bits"
        );
    }
    Ok(out)
}

/// The mask component's per-thread words: `fm_mask_bits` holds the FragmentNative words of
/// one step for one consumer thread (`ceil(block_n / 2 / 32)` per key block, the step's
/// blocks one after the other) and `fm_load_mask_bits` reads each block's words with the
/// widest aligned vector load (one per thread per partial tile). `words_per_block`
/// `None`: window mode, no words (every bit set); `threads`: the consumer threads, the
/// middle axis of the words `[tiles, threads, words_per_block]`.
pub fn row_block_words(words_per_block: Option<u32>, step_blocks: u32, threads: u32) -> String {
    let per_block = words_per_block.unwrap_or(1);
    let words = per_block * step_blocks;
    let mut s = format!(
        "// FragmentNative words of one step for one consumer thread: bit b of w[{per_block}*h + j] is the bit of\n\
         // slot h's value 32*j + b.\n\
         struct fm_mask_bits {{ unsigned w[{words}]; }};\n\
         __device__ __forceinline__ fm_mask_bits fm_mask_all() {{\n\
         \x20   fm_mask_bits b;\n\
         #pragma unroll\n\
         \x20   for (int j = 0; j < {words}; ++j) b.w[j] = 0xffffffffu;\n\
         \x20   return b;\n\
         }}\n"
    );
    if words_per_block.is_none() {
        s.push_str(
            "__device__ __forceinline__ fm_mask_bits fm_load_mask_bits(const fm_attn_params& p, const fm_tile& t, int ct) {\n\
             \x20   return fm_mask_all();   // window mode reads no words\n\
             }\n",
        );
        return s;
    }
    // words: u32 [tiles, mask_threads, per_block]; thread ct's words of one tile are
    // contiguous. Widest vector the words of one thread fill exactly (they start at a
    // multiple of `per_block`).
    let lanes = match per_block {
        2 => 2,
        4 => 4,
        _ => 1,
    };
    let _ = write!(
        s,
        "// words: u32 [partial tiles, {threads} consumer threads, {per_block}] (masks::PackedMask, FragmentNative);\n\
         // element offset (tile * {threads} + ct) * {per_block}: one coalesced load per thread per tile.\n\
         __device__ __forceinline__ fm_mask_bits fm_load_mask_bits(const fm_attn_params& p, const fm_tile& t, int ct) {{\n\
         \x20   fm_mask_bits b;\n\
         #pragma unroll\n\
         \x20   for (int h = 0; h < FM_STEP_BLOCKS; ++h) {{\n\
         \x20       if (t.mask_tile[h] < 0) {{\n\
         \x20           // full block: every bit set; missing slot: none\n\
         #pragma unroll\n\
         \x20           for (int j = 0; j < {per_block}; ++j) b.w[{per_block} * h + j] = t.n_block[h] >= 0 ? 0xffffffffu : 0u;\n\
         \x20           continue;\n\
         \x20       }}\n\
         \x20       const unsigned* src = p.words + ((long long)t.mask_tile[h] * {threads} + ct) * {per_block};\n",
    );
    let mut j = 0;
    while j < per_block {
        match lanes {
            1 => {
                let _ = writeln!(s, "        b.w[{per_block} * h + {j}] = __ldg(src + {j});");
            }
            2 => {
                let _ = writeln!(
                    s,
                    "        {{ const uint2 v = __ldg(reinterpret_cast<const uint2*>(src + {j})); b.w[{per_block} * h + {j}] = v.x; b.w[{per_block} * h + {}] = v.y; }}",
                    j + 1
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "        {{ const uint4 v = __ldg(reinterpret_cast<const uint4*>(src + {j})); b.w[{per_block} * h + {j}] = v.x; b.w[{per_block} * h + {}] = v.y; b.w[{per_block} * h + {}] = v.z; b.w[{per_block} * h + {}] = v.w; }}",
                    j + 1,
                    j + 2,
                    j + 3
                );
            }
        }
        j += lanes;
    }
    s.push_str("    }\n    return b;\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mask_text_defines_one_apply() {
        for text in [
            ROW_BLOCK_WINDOW,
            ROW_BLOCK_WORDS,
            KEY_TILE_WINDOW,
            KEY_TILE_WORDS,
        ] {
            assert_eq!(text.matches("void fm_apply_mask(").count(), 1);
        }
        assert_eq!(ROW_BLOCK_WORDS.matches("int fm_mask_bias(").count(), 1);
    }

    #[test]
    fn words_are_loaded_with_the_widest_vector_that_fits() {
        let four = row_block_words(Some(4), 1, 256);
        assert!(four.contains("const uint4 v = __ldg"));
        assert!(four.contains("* 256 + ct) * 4"));
        let two = row_block_words(Some(2), 2, 128);
        assert!(two.contains("const uint2 v = __ldg") && two.contains("unsigned w[4]"));
        let window = row_block_words(None, 1, 128);
        assert!(window.contains("window mode reads no words") && !window.contains("__ldg"));
    }

    /// Parses `key0 + ROW >= p.seqlen_k) w &= ~0xBITS` lines back into (row, bits).
    /// (row, the bits cleared from each word) of each line.
    fn clears(text: &str) -> Vec<(u32, Vec<u32>)> {
        text.lines()
            .map(|l| {
                let row = l
                    .split("key0 + ")
                    .nth(1)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap();
                let bits = l
                    .split("~0x")
                    .skip(1)
                    .map(|b| u32::from_str_radix(b.split('u').next().unwrap(), 16).unwrap())
                    .collect();
                (row.parse().unwrap(), bits)
            })
            .collect()
    }

    #[test]
    fn key_bound_clears_exactly_the_bits_of_each_value_past_the_key_bound() {
        // 64-query steps (one word) and 128-query steps (two).
        for n in [64, 128] {
            let st = FragmentMap::new(n).unwrap();
            let lines = clears(&key_bound_clear(&st, "").unwrap());
            assert_eq!(lines.len(), st.row_slots().len());
            // For every key bound relative to the thread's first key row, the bits left are
            // exactly the values whose key row is below it.
            for bound in -2i64..20 {
                let mut w = vec![u32::MAX; st.values().div_ceil(32) as usize];
                for (row, bits) in &lines {
                    assert_eq!(bits.len(), w.len());
                    if i64::from(*row) >= bound {
                        for (word, b) in w.iter_mut().zip(bits) {
                            *word &= !b;
                        }
                    }
                }
                for v in 0..st.values() {
                    let visible = i64::from(st.value_row(v)) < bound;
                    let bit = w[(v / 32) as usize] >> (v % 32) & 1 == 1;
                    assert_eq!(bit, visible, "n {n} bound {bound} value {v}");
                }
            }
        }
        assert!(key_bound_clear(&FragmentMap::new(256).unwrap(), "").is_err());
    }
}
