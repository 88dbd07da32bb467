//! The online softmax component (base 2, FlashAttention-2/3 style;
//! docs/architecture.md §3, "consumer"), parameterised by the fragment that holds the
//! scores: which row slot each value belongs to, and which lanes share a row.
//!
//! Every kernel of the family that keeps a running max and sum is emitted from here:
//! - [`wgmma_online`]: the wgmma kernels (`fm_online_softmax` and `fm_rescale_o` over a
//!   `m64nN` accumulator, the row slots read off `family::fragment::FragmentMap`); the
//!   running max is kept unscaled and the scale is fused into the exponent;
//! - [`mma_sync_update`]: decode's `mma.sync` m16n8 tiles (`SM80_C_LAYOUT`), one or several
//!   16-key tiles under one update; the scores arrive scaled (the mask step scales them,
//!   [`MMA_SYNC_SCALE_MAX`] when nothing is masked) and the tile's sum is folded into the
//!   running sum once.
//!
//! Both use the same pieces, each defined here once: the reduction over the lanes that
//! share a row ([`quad_reduce`]), the end of a row in the epilogues ([`finish`]: the
//! final sum, `1 / sum` and the lse), the guard that keeps an
//! empty row (max `-inf`) from giving NaN, and `P = exp2(scale·s − max)`
//! ([`probability`], also the backward's recompute of P from the saved lse).
//! The two keep their own order of floating-point operations, which their kernels were
//! tested and measured with; unifying it would change the machine code.

use std::fmt::Write as _;

use super::LayoutError;

/// The reduction of [`quad_reduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// `fmaxf` (the row max).
    Max,
    /// `+` (the row sum).
    Sum,
}

/// The two xor masks that reach the other lanes holding a row: the bits in which the
/// lanes holding row 0 (`row_of_lane(lane) == 0`, lanes 0..32) differ. Errors unless
/// exactly four lanes differing in two bits (a quad) hold it.
pub fn quad_partners(row_of_lane: impl Fn(u32) -> u32) -> Result<[u32; 2], LayoutError> {
    let lanes: Vec<u32> = (0..32).filter(|&t| row_of_lane(t) == 0).collect();
    let span = lanes.iter().fold(0, |acc, &l| acc | l);
    let bits: Vec<u32> = (0..5).map(|b| 1 << b).filter(|b| span & b != 0).collect();
    match bits[..] {
        [a, b] if lanes.len() == 4 => Ok([a, b]),
        _ => Err(LayoutError(format!(
            "row 0 is held by lanes {lanes:?}, expected 4 lanes differing in 2 bits (one quad)"
        ))),
    }
}

/// `var` reduced over the lanes of its row: one `__shfl_xor_sync` per partner, each line
/// at `indent`.
pub fn quad_reduce(reduce: Reduce, var: &str, partners: [u32; 2], indent: &str) -> String {
    let mut s = String::new();
    for x in partners {
        let _ = match reduce {
            Reduce::Max => writeln!(
                s,
                "{indent}{var} = fmaxf({var}, __shfl_xor_sync(0xffffffffu, {var}, {x}));"
            ),
            Reduce::Sum => writeln!(
                s,
                "{indent}{var} += __shfl_xor_sync(0xffffffffu, {var}, {x});"
            ),
        };
    }
    s
}

/// `exp2(scale · score − max)` as one FMA and one `ex2.approx` (`fm_exp2`, `family::ptx`):
/// a probability of the softmax, from the unscaled score.
pub fn probability(score: &str, scale: &str, max: &str) -> String {
    format!("fm_exp2(fmaf({score}, {scale}, -{max}))")
}

/// The empty-row guard: `dst = max == -inf ? 0 : max (· scale)`, so that `exp2(x - dst)`
/// of a row with nothing visible is 0, not NaN.
fn guarded_max(dst: &str, max: &str, scale: Option<&str>, parenthesised: bool) -> String {
    let scaled = match scale {
        Some(scale) => format!("{max} * {scale}"),
        None => max.to_string(),
    };
    if parenthesised {
        format!("{dst} = ({max} == FM_NEG_INF) ? 0.f : {scaled};")
    } else {
        format!("{dst} = {max} == FM_NEG_INF ? 0.f : {scaled};")
    }
}

/// How a kernel keeps its running max, for the lse of [`finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunningMax<'a> {
    /// Of the raw scores (the scale is applied in the exponent): `lse = max · scale + ln sum`,
    /// `scale` the natural-log softmax scale.
    Unscaled {
        /// The softmax scale (natural log), a CUDA expression.
        scale: &'a str,
    },
    /// Of the scores already scaled by `scale · log2 e`: `lse = (max + log2 sum) · ln 2`.
    Base2,
}

/// How [`finish`] takes `log2` of the sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Log2 {
    /// `fm_log2` (`lg2.approx.ftz`, `family::ptx::MATH`).
    Approx,
    /// CUDA's `log2f` (full precision, denormals).
    Full,
}

/// ln 2, as a CUDA float literal.
pub const LN2: &str = "0.69314718055994531f";

/// The CUDA names and conventions of one row for [`finish`].
#[derive(Debug, Clone, Copy)]
pub struct RowFinish<'a> {
    /// The thread's partial row sum (reduced in place).
    pub sum: &'a str,
    /// The running max.
    pub max: &'a str,
    /// Where `1 / sum` goes.
    pub inv: &'a str,
    /// Where the lse goes.
    pub lse: &'a str,
    /// How the running max is kept.
    pub running_max: RunningMax<'a>,
    /// Which `log2`.
    pub log2: Log2,
}

/// The end of a row's online softmax (the epilogue): the per-thread partial `sum` reduced
/// over the lanes of its row (`partners`), `inv = 1 / sum` and the natural-log
/// `lse`, or `inv = 0` and `lse = -inf` for a row with nothing visible. Statements, each at
/// `indent`.
pub fn finish(row: &RowFinish<'_>, partners: [u32; 2], indent: &str) -> String {
    let RowFinish {
        sum,
        max,
        inv,
        lse,
        running_max,
        log2,
    } = *row;
    let i = indent;
    let log = match log2 {
        Log2::Approx => format!("fm_log2({sum})"),
        Log2::Full => format!("log2f({sum})"),
    };
    let (note, value) = match running_max {
        RunningMax::Unscaled { scale } => (
            "natural log: lse = scale * max + ln(sum) = scale * max + log2(sum) * ln 2",
            format!("{max} * {scale} + {log} * {LN2}"),
        ),
        RunningMax::Base2 => (
            "natural log: lse = (max + log2(sum)) * ln 2 (max of base-2 scaled scores)",
            format!("({max} + {log}) * {LN2}"),
        ),
    };
    format!(
        "{reduce}\
         {i}const bool any = {sum} > 0.f;\n\
         {i}{inv} = any ? 1.f / {sum} : 0.f;\n\
         {i}// {note}\n\
         {i}{lse} = any ? {value} : FM_NEG_INF;\n",
        reduce = quad_reduce(Reduce::Sum, sum, partners, i),
    )
}

/// The rows of a wgmma accumulator pair (S and O) as [`wgmma_online`] needs them, all
/// read off `family::fragment::FragmentMap`.
#[derive(Debug, Clone)]
pub struct WgmmaRows {
    /// Values of S per thread.
    pub s_values: u32,
    /// The row slot (0 or 1) of S's value `i`, a CUDA expression of `i`.
    pub s_row_slot: String,
    /// The name of S's layout, for comments (`CLayout_64xN = ...`).
    pub s_layout: String,
    /// A comment block describing S's layout (ends with a newline).
    pub s_doc: String,
    /// Values of O per thread.
    pub o_values: u32,
    /// The row slot of O's value `i`, a CUDA expression of `i`.
    pub o_row_slot: String,
    /// The name of O's layout, for comments.
    pub o_layout: String,
    /// Rows between a thread's two row slots.
    pub row_slot_stride: u32,
    /// The lanes sharing a row ([`quad_partners`]).
    pub partners: [u32; 2],
    /// Keep a row's running max while a step's max exceeds it by at most
    /// [`LAZY_RESCALE_LOG2`] (base-2 units of the scaled scores): P stays at most
    /// `2^LAZY_RESCALE_LOG2`, the correction is exactly 1 and `fm_rescale_o` returns early
    /// when neither of the thread's rows moved (FlashAttention-4's SM100 conditional
    /// rescaling). Assumes a positive scale.
    pub lazy_rescale: bool,
}

/// The headroom of [`WgmmaRows::lazy_rescale`]: P up to 2^8 (bf16 and the f32 sums hold it).
pub const LAZY_RESCALE_LOG2: f32 = 8.0;

/// The lazy-rescale test of one row (empty without lazy rescale): keep the running max
/// when the step's max is at most [`LAZY_RESCALE_LOG2`] above it. A row with nothing
/// visible yet (max -inf) never passes (`inf` or NaN compare false).
fn lazy_keep(lazy: bool) -> String {
    if lazy {
        format!(
            "        // Lazy rescale: keep the running max while the step's is at most {l} above it (log2 units).\n        \
             if ((m_new[r] - row_max[r]) * scale_log2 <= {l:.1}f) m_new[r] = row_max[r];\n",
            l = LAZY_RESCALE_LOG2
        )
    } else {
        String::new()
    }
}

/// The correction of the previous O for row r: exactly 1 where lazy rescale kept the max.
fn correction(lazy: bool) -> &'static str {
    if lazy {
        "corr[r] = (m_new[r] == row_max[r]) ? 1.f : fm_exp2(row_max[r] * scale_log2 - m_scaled[r]);"
    } else {
        "corr[r] = fm_exp2(row_max[r] * scale_log2 - m_scaled[r]);"
    }
}

/// `fm_online_softmax(s, row_max, row_sum, corr, scale_log2)`: folds one step of S into the
/// running (unscaled) max and the per-thread partial sums, leaves P in `s` and the
/// correction of the previous O in `corr`; `fm_rescale_o(o, corr)` applies it. The quad
/// reduction of the sums happens once, in the epilogue.
pub fn wgmma_online(rows: &WgmmaRows) -> String {
    let WgmmaRows {
        s_values,
        s_row_slot,
        s_layout,
        s_doc,
        o_values,
        o_row_slot,
        o_layout,
        row_slot_stride,
        partners,
        lazy_rescale,
    } = rows;
    let max_reduce = quad_reduce(Reduce::Max, "m_new[r]", *partners, "        ");
    let guard = guarded_max("m_scaled[r]", "m_new[r]", Some("scale_log2"), true);
    let p = probability("s[i]", "scale_log2", "m_scaled[r]");
    format!(
        "// ---- online softmax (base 2), FlashAttention-3 style ----\n\
         {s_doc}// Values with row slot r belong to row frag_row + {row_slot_stride}*r; the four lanes of a quad (thread leaf\n\
         // 4:128, shuffle xor {x0} and {x1}) hold the rest of those rows.\n\
         __device__ __forceinline__ void fm_online_softmax(float (&s)[{s_values}], float (&row_max)[2], float (&row_sum)[2],\n\
         \x20                                                 float (&corr)[2], float scale_log2) {{\n\
         \x20   float m_new[2] = {{row_max[0], row_max[1]}};\n\
         #pragma unroll\n\
         \x20   for (int i = 0; i < {s_values}; ++i) {{\n\
         \x20       const int r = {s_row_slot};   // {s_layout} value row slot\n\
         \x20       m_new[r] = fmaxf(m_new[r], s[i]);\n\
         \x20   }}\n\
         \x20   float m_scaled[2];\n\
         #pragma unroll\n\
         \x20   for (int r = 0; r < 2; ++r) {{\n\
         {max_reduce}\
         {lazy}\
         \x20       // A row with nothing visible so far keeps max -inf; subtract 0 instead so exp2 gives 0, not NaN.\n\
         \x20       {guard}\n\
         \x20       {corr}\n\
         \x20       row_max[r] = m_new[r];\n\
         \x20       row_sum[r] *= corr[r];\n\
         \x20   }}\n\
         #pragma unroll\n\
         \x20   for (int i = 0; i < {s_values}; ++i) {{\n\
         \x20       const int r = {s_row_slot};\n\
         \x20       s[i] = {p};\n\
         \x20       row_sum[r] += s[i];   // per-thread partial sum; the quad reduction happens once, at the end\n\
         \x20   }}\n\
         }}\n\
         \n\
         __device__ __forceinline__ void fm_rescale_o(float (&o)[{o_values}], const float (&corr)[2]) {{\n\
         {skip}\
         #pragma unroll\n\
         \x20   for (int i = 0; i < {o_values}; ++i) {{\n\
         \x20       o[i] *= corr[{o_row_slot}];   // {o_layout} value row offset\n\
         \x20   }}\n\
         }}\n",
        x0 = partners[0],
        x1 = partners[1],
        lazy = lazy_keep(*lazy_rescale),
        corr = correction(*lazy_rescale),
        skip = if *lazy_rescale {
            "\x20   if (corr[0] == 1.f && corr[1] == 1.f) return;   // lazy rescale: neither row moved its max\n"
        } else {
            ""
        },
    )
}

/// `fm_scale_max(s, scale, row_max)`: a decode tile whose scores are all visible, scaled
/// (base 2) and folded into the row maxima of the lane's two rows (c-value `c` of n-tile
/// `nt` is row slot `c / 2`, `SM80_C_LAYOUT`).
pub const MMA_SYNC_SCALE_MAX: &str = r#"// A warp tile whose scores are all visible: scale them (base 2) and fold them into the
// row maxima of the lane's two rows (c-value c of n-tile nt is row c / 2, SM80_C_LAYOUT).
__device__ __forceinline__ void fm_scale_max(float (&s)[2][4], float scale, float (&row_max)[2]) {
    #pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
            s[nt][c] *= scale;
            row_max[c / 2] = fmaxf(row_max[c / 2], s[nt][c]);
        }
    }
}
"#;

/// The online update of decode's `mma.sync` tiles: `scores` are `float [2][4]` arrays of
/// scaled scores (n-tile, c-value; c-value `c` is row slot `c / 2` of `SM80_C_LAYOUT`)
/// whose tile maxima are in `row_max[2]`. Reduces the maxima over the lanes of each row
/// (`partners`), updates the running max `m_run` and sum `l_run`, turns the scores into
/// P, and rescales `o[n_tiles][4]`. Every line at `indent`.
pub fn mma_sync_update(scores: &[&str], n_tiles: u32, partners: [u32; 2], indent: &str) -> String {
    let i = indent;
    let max_reduce = quad_reduce(Reduce::Max, "row_max[h]", partners, &format!("{i}    "));
    let guard = guarded_max("m_use[h]", "m_new", None, false);
    let mut s = format!(
        "{i}float alpha[2], m_use[2];\n\
         {i}#pragma unroll\n\
         {i}for (int h = 0; h < 2; ++h) {{\n\
         {i}    // The four lanes of a quad hold one row (SM80_C_LAYOUT): reduce over them.\n\
         {max_reduce}\
         {i}    const float m_new = fmaxf(m_run[h], row_max[h]);\n\
         {i}    // A row with nothing visible yet keeps max -inf; subtract 0 so exp2 gives 0, not NaN.\n\
         {i}    {guard}\n\
         {i}    alpha[h] = fm_exp2(m_run[h] - m_use[h]);\n\
         {i}    m_run[h] = m_new;\n\
         {i}}}\n\
         {i}float row_sum[2] = {{0.f, 0.f}};\n\
         {i}#pragma unroll\n\
         {i}for (int nt = 0; nt < 2; ++nt) {{\n\
         {i}    #pragma unroll\n\
         {i}    for (int c = 0; c < 4; ++c) {{\n"
    );
    for t in scores {
        let _ = writeln!(
            s,
            "{i}        {t}[nt][c] = fm_exp2({t}[nt][c] - m_use[c / 2]);"
        );
    }
    let sum: Vec<String> = scores.iter().map(|t| format!("{t}[nt][c]")).collect();
    let _ = write!(
        s,
        "{i}        row_sum[c / 2] += {};\n\
         {i}    }}\n\
         {i}}}\n\
         {i}#pragma unroll\n\
         {i}for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + row_sum[h];\n\
         {i}#pragma unroll\n\
         {i}for (int n = 0; n < {n_tiles}; ++n) {{\n\
         {i}   ",
        sum.join(" + ")
    );
    for c in 0..4 {
        let _ = write!(s, " o[n][{c}] *= alpha[{}];", c / 2);
    }
    let _ = writeln!(s, "\n{i}}}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazy_rescale_keeps_the_max_within_2_pow_8_and_skips_an_unmoved_rescale() {
        let rows = |lazy| WgmmaRows {
            s_values: 64,
            s_row_slot: "((i / 2) % 2)".into(),
            s_layout: "S".into(),
            s_doc: String::new(),
            o_values: 32,
            o_row_slot: "((i / 2) % 2)".into(),
            o_layout: "O".into(),
            row_slot_stride: 8,
            partners: [1, 2],
            lazy_rescale: lazy,
        };
        let eager = wgmma_online(&rows(false));
        assert!(eager.contains("corr[r] = fm_exp2(row_max[r] * scale_log2 - m_scaled[r]);"));
        assert!(!eager.contains("Lazy") && !eager.contains("return;"));
        let lazy = wgmma_online(&rows(true));
        assert!(lazy
            .contains("if ((m_new[r] - row_max[r]) * scale_log2 <= 8.0f) m_new[r] = row_max[r];"));
        assert!(lazy.contains("corr[r] = (m_new[r] == row_max[r]) ? 1.f : fm_exp2("));
        assert!(lazy.contains("if (corr[0] == 1.f && corr[1] == 1.f) return;"));
        // The keep test sits after the row's quad reduction and before the empty-row guard.
        let (keep, guard) = (
            lazy.find("m_new[r] = row_max[r];").unwrap(),
            lazy.find("m_scaled[r] = (m_new[r] == FM_NEG_INF)").unwrap(),
        );
        assert!(lazy.find("__shfl_xor_sync").unwrap() < keep && keep < guard);
    }

    #[test]
    fn quad_partners_of_the_mma_layouts_are_lanes_xor_1_and_2() {
        // SM80_C_LAYOUT and the wgmma accumulator: lane t holds row (t / 4) % 8 (+ 16 warp).
        assert_eq!(quad_partners(|t| (t / 4) % 8).unwrap(), [1, 2]);
        // Four lanes 8 apart share a row: partners xor 8 and 16. Sixteen lanes are no quad.
        assert_eq!(quad_partners(|t| t % 8).unwrap(), [8, 16]);
        assert!(quad_partners(|t| t % 2).is_err());
    }

    #[test]
    fn quad_reduce_writes_one_shuffle_per_partner() {
        assert_eq!(
            quad_reduce(Reduce::Sum, "x[r]", [1, 2], "  "),
            "  x[r] += __shfl_xor_sync(0xffffffffu, x[r], 1);\n  x[r] += __shfl_xor_sync(0xffffffffu, x[r], 2);\n"
        );
    }

    #[test]
    fn paired_update_folds_both_tiles_into_one_sum() {
        let one = mma_sync_update(&["s"], 16, [1, 2], "");
        let two = mma_sync_update(&["s", "s1"], 16, [1, 2], "");
        assert!(one.contains("row_sum[c / 2] += s[nt][c];"));
        assert!(two.contains("row_sum[c / 2] += s[nt][c] + s1[nt][c];"));
        assert!(two.contains("s1[nt][c] = fm_exp2(s1[nt][c] - m_use[c / 2]);"));
        assert_eq!(one.matches("__shfl_xor_sync").count(), 2);
    }
}
