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
    /// With `n > 0`, [`wgmma_online`] also emits `fm_online_softmax_full`, for steps with no
    /// masked value: one value pair in every `n` (pairs `j` with `j % n == n - 1`) takes its
    /// exp2 from [`exp2_poly`] on the FMA pipe instead of the SFU.
    pub emulate_every: u32,
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

/// The cubic `p(f) = 1 + c1 f + c2 f^2 + c3 f^3` of [`exp2_poly`] (`[c1, c2, c3]`): `2^f`
/// on `[0, 1)`, fitted here by iteratively reweighted least squares for the least maximum
/// relative error (8.6e-5, under bf16's 3.9e-3 rounding of P).
pub const EXP2_POLY_COEFFS: [f32; 3] = [0.695_116_2, 0.227_647_66, 0.077_064_6];

/// `fm_exp2_poly(x)`: `2^x` on the FMA pipe, for finite `x <= 0` (a step with no masked
/// value; `x` below -127 gives a value under 2^-126 instead of 0). `floor(x)` comes from
/// one add of 1.5 * 2^23 rounded down (the integer lands in the low mantissa bits, which
/// shifted by 23 add to the exponent of the result), `2^f` for `f = x - floor(x)` from
/// [`EXP2_POLY_COEFFS`]. The SFU takes 8 cycles per warp instruction (16 results per clock
/// per SM, CUDA C++ Programming Guide, "Arithmetic Instructions"), the softmax's longest
/// pipe at head dim 64; this trades one SFU instruction for nine issue slots
/// (FlashAttention-4's `ex2_emulation` on SM100 does the same).
pub fn exp2_poly() -> String {
    let [c1, c2, c3] = EXP2_POLY_COEFFS;
    format!(
        "// 2^x on the FMA pipe (finite x <= 0): 2^floor(x) * p(x - floor(x)), p a cubic with p(0) = 1.\n\
         __device__ __forceinline__ float fm_exp2_poly(float x) {{\n\
         \x20   x = fmaxf(x, -127.f);\n\
         \x20   const float t = __fadd_rd(x, 12582912.f);        // 1.5 * 2^23 + floor(x): floor(x) in the low bits\n\
         \x20   const float f = x - (t - 12582912.f);            // x - floor(x), in [0, 1)\n\
         \x20   const float q = fmaf(fmaf(fmaf({c3:e}f, f, {c2:e}f), f, {c1:e}f), f, 1.f);\n\
         \x20   return __int_as_float(__float_as_int(q) + (__float_as_int(t) << 23));\n\
         }}\n"
    )
}

/// [`exp2_poly`]'s arithmetic on the host (f32, the same operations in the same order),
/// for tests of its error.
pub fn exp2_poly_host(x: f32) -> f32 {
    let [c1, c2, c3] = EXP2_POLY_COEFFS;
    let x = x.max(-127.0);
    let n = x.floor();
    let f = x - n;
    let q = c3.mul_add(f, c2).mul_add(f, c1).mul_add(f, 1.0);
    f32::from_bits(q.to_bits().wrapping_add((n as i32 as u32) << 23))
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
        emulate_every,
        lazy_rescale,
    } = rows;
    let full = if *emulate_every == 0 {
        String::new()
    } else {
        online_full(rows)
    };
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
         {full}\
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

/// `fm_online_softmax_full`: [`wgmma_online`]'s update for a step with no masked value,
/// every `emulate_every`-th value pair's exp2 from [`exp2_poly`].
fn online_full(rows: &WgmmaRows) -> String {
    let WgmmaRows {
        s_values,
        s_row_slot,
        partners,
        emulate_every,
        lazy_rescale,
        ..
    } = rows;
    let max_reduce = quad_reduce(Reduce::Max, "m_new[r]", *partners, "        ");
    let guard = guarded_max("m_scaled[r]", "m_new[r]", Some("scale_log2"), true);
    let p = probability("s[i]", "scale_log2", "m_scaled[r]");
    format!(
        "\n{poly}// The same update for a step with no masked value: value pairs j with j % {n} == {last} take\n\
         // exp2 on the FMA pipe (fm_exp2_poly), the others on the SFU.\n\
         __device__ __forceinline__ void fm_online_softmax_full(float (&s)[{s_values}], float (&row_max)[2], float (&row_sum)[2],\n\
         \x20                                                      float (&corr)[2], float scale_log2) {{\n\
         \x20   float m_new[2] = {{row_max[0], row_max[1]}};\n\
         #pragma unroll\n\
         \x20   for (int i = 0; i < {s_values}; ++i) {{\n\
         \x20       const int r = {s_row_slot};\n\
         \x20       m_new[r] = fmaxf(m_new[r], s[i]);\n\
         \x20   }}\n\
         \x20   float m_scaled[2];\n\
         #pragma unroll\n\
         \x20   for (int r = 0; r < 2; ++r) {{\n\
         {max_reduce}\
         {lazy}\
         \x20       {guard}\n\
         \x20       {corr}\n\
         \x20       row_max[r] = m_new[r];\n\
         \x20       row_sum[r] *= corr[r];\n\
         \x20   }}\n\
         #pragma unroll\n\
         \x20   for (int i = 0; i < {s_values}; ++i) {{\n\
         \x20       const int r = {s_row_slot};\n\
         \x20       if ((i / 2) % {n} == {last}) s[i] = fm_exp2_poly(fmaf(s[i], scale_log2, -m_scaled[r]));\n\
         \x20       else s[i] = {p};\n\
         \x20       row_sum[r] += s[i];\n\
         \x20   }}\n\
         }}\n",
        n = emulate_every,
        last = emulate_every - 1,
        poly = exp2_poly(),
        lazy = lazy_keep(*lazy_rescale),
        corr = correction(*lazy_rescale),
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
    fn emulated_exp2_is_within_1e_4_relative_of_exp2_on_the_softmax_range() {
        // x = s * scale - max <= 0; below -126 the result is subnormal or tiny. Every f32
        // step of 1/4096 over [-126, 0] plus the integers and the values just below them.
        let mut worst = 0.0f64;
        let mut x = -126.0f64;
        while x <= 0.0 {
            for v in [x, x - 1e-6] {
                let got = exp2_poly_host(v as f32) as f64;
                let want = (v as f32 as f64).exp2();
                worst = worst.max(((got - want) / want).abs());
            }
            x += 1.0 / 4096.0;
        }
        assert!(worst < 1.0e-4, "max relative error {worst:e}");
        // Far below the range: no wrap of the exponent into a large value.
        for v in [-127.0f32, -200.0, -1e30] {
            let y = exp2_poly_host(v);
            assert!((0.0..=1.2e-38).contains(&y), "{v} -> {y:e}");
        }
        assert_eq!(exp2_poly_host(0.0), 1.0);
    }

    #[test]
    fn the_emulated_softmax_is_emitted_only_with_a_period() {
        let rows = |every| WgmmaRows {
            s_values: 64,
            s_row_slot: "((i / 2) % 2)".into(),
            s_layout: "S".into(),
            s_doc: String::new(),
            o_values: 32,
            o_row_slot: "((i / 2) % 2)".into(),
            o_layout: "O".into(),
            row_slot_stride: 8,
            partners: [1, 2],
            emulate_every: every,
            lazy_rescale: false,
        };
        let off = wgmma_online(&rows(0));
        assert!(!off.contains("fm_exp2_poly") && !off.contains("fm_online_softmax_full"));
        let on = wgmma_online(&rows(8));
        assert!(on.contains("fm_online_softmax_full") && on.contains("(i / 2) % 8 == 7"));
        assert!(on.contains("__device__ __forceinline__ float fm_exp2_poly(float x)"));
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
