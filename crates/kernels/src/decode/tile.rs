//! The consumer of one step of decode's key loop, for one 16-key tile or several under
//! one softmax update: `S = Q·Kᵀ` with `mma.sync.m16n8k16` (operand orders of
//! [`super::operands`]), the per-element mask (causal / window / length / mask bits) and
//! scale, the family's online softmax ([`crate::family::softmax::mma_sync_update`]) and
//! `O += P·V`. The single tile and the pair of the shared-K/V consumer are the same
//! emitter over one or two [`TileNames`].

use std::fmt::Write as _;

use super::config::{ConfigError, DecodeConfig, TILE_KEYS};
use super::operands::{c_thread_row_col, p_source, qk_a_source, qk_b_source, v_row};
use crate::family::softmax;

/// The CUDA names of one 16-key tile of a step.
#[derive(Debug, Clone, Copy)]
pub(super) struct TileNames {
    /// Scores `float [2][4]` (n-tile, c-value).
    scores: &'static str,
    /// The K and V tiles' shared-memory addresses.
    k_tile: &'static str,
    v_tile: &'static str,
    /// The tile's first key.
    key0: &'static str,
    /// The 16 mask bits of each of the lane's two rows.
    bits: &'static str,
    /// Names of the per-element key and visibility.
    key: &'static str,
    visible: &'static str,
    /// Prefix of P's four A registers.
    p_regs: &'static str,
}

/// One tile per update (both CTA kinds).
pub(super) const SINGLE: [TileNames; 1] = [TileNames {
    scores: "s",
    k_tile: "k_tile",
    v_tile: "v_tile",
    key0: "key0",
    bits: "row_bits",
    key: "key",
    visible: "visible",
    p_regs: "pa",
}];

/// Two tiles per update (the shared-K/V consumer): one max, rescale and sum per 32 keys
/// and two independent QK chains.
pub(super) const PAIR: [TileNames; 2] = [
    SINGLE[0],
    TileNames {
        scores: "s1",
        k_tile: "k_tile1",
        v_tile: "v_tile1",
        key0: "key0_1",
        bits: "row_bits1",
        key: "key1",
        visible: "visible1",
        p_regs: "pb",
    },
];

/// The lanes that share a row of the C fragment (`SM80_C_LAYOUT`'s row layout
/// `(4,8):(0,1)`, [`c_thread_row_col`]): the shuffle partners of the row reductions.
pub(super) fn row_partners() -> Result<[u32; 2], ConfigError> {
    let (c_row, _) = c_thread_row_col()?;
    softmax::quad_partners(|lane| {
        c_row
            .eval(i64::from(lane))
            .map_or(u32::MAX, |r| u32::try_from(r).unwrap_or(u32::MAX))
    })
    .map_err(|e| ConfigError(e.0))
}

/// Nested `f(a, f(b, ...))` of `items`.
fn fold(f: &str, items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [first, rest @ ..] => format!("{f}({first}, {})", fold(f, rest)),
    }
}

/// The step body over `tiles`, every line at `indent`.
pub(super) fn body(
    config: DecodeConfig,
    tiles: &[TileNames],
    indent: &str,
) -> Result<String, ConfigError> {
    let i = indent;
    let partners = row_partners()?;
    let decls: Vec<String> = tiles
        .iter()
        .map(|t| format!("{}[2][4]", t.scores))
        .collect();
    let mut s = format!("{i}float {};\n{i}#pragma unroll\n", decls.join(", "));
    let zero = |t: &TileNames| {
        let n = t.scores;
        format!("{n}[nt][0] = {n}[nt][1] = {n}[nt][2] = {n}[nt][3] = 0.f;")
    };
    if let [only] = tiles {
        let _ = writeln!(s, "{i}for (int nt = 0; nt < 2; ++nt) {}", zero(only));
    } else {
        let _ = writeln!(s, "{i}for (int nt = 0; nt < 2; ++nt) {{");
        for t in tiles {
            let _ = writeln!(s, "{i}    {}", zero(t));
        }
        let _ = writeln!(s, "{i}}}");
    }
    let targets: Vec<(&str, &str)> = tiles.iter().map(|t| (t.scores, t.k_tile)).collect();
    s.push_str(&qk_product_for(config, &targets));
    let bits: Vec<String> = tiles
        .iter()
        .flat_map(|t| [format!("{}[0]", t.bits), format!("{}[1]", t.bits)])
        .collect();
    let keys: Vec<String> = tiles.iter().map(|t| t.key0.to_string()).collect();
    let _ = writeln!(
        s,
        "{i}// Mask (causal / window / length / mask bits, per element) and scale: c-value c of key\n\
         {i}// n-tile nt is row frag_row + 8 (c / 2), key key0 + 8 nt + frag_col + c % 2 (of each tile).\n\
         {i}float row_max[2] = {{FM_NEG_INF, FM_NEG_INF}};\n\
         {i}// When every score of the warp's tiles is visible, scale only.\n\
         {i}const bool all_visible = __all_sync(0xffffffffu, ({}) == 0xffffu && {} >= lo_all && {} + {TILE_KEYS} <= hi_all);\n\
         {i}if (all_visible) {{",
        bits.join(" & "),
        fold("min", &keys),
        fold("max", &keys),
    );
    for t in tiles {
        let _ = writeln!(
            s,
            "{i}    fm_scale_max({}, p.scale_log2, row_max);",
            t.scores
        );
    }
    let _ = writeln!(
        s,
        "{i}}} else {{\n\
         {i}#pragma unroll\n\
         {i}for (int nt = 0; nt < 2; ++nt) {{\n\
         {i}    #pragma unroll\n\
         {i}    for (int c = 0; c < 4; ++c) {{\n\
         {i}        const int col = 8 * nt + (int)frag_col + (c % 2);"
    );
    for t in tiles {
        let _ = writeln!(s, "{i}        const int {} = {} + col;", t.key, t.key0);
    }
    for t in tiles {
        let _ = writeln!(
            s,
            "{i}        const bool {v} = {k} >= lo_key[c / 2] && {k} < hi_key[c / 2] && (({b}[c / 2] >> col) & 1u);",
            v = t.visible,
            k = t.key,
            b = t.bits
        );
    }
    for t in tiles {
        let _ = writeln!(
            s,
            "{i}        {n}[nt][c] = {v} ? {n}[nt][c] * p.scale_log2 : FM_NEG_INF;",
            n = t.scores,
            v = t.visible
        );
    }
    let values: Vec<String> = tiles
        .iter()
        .map(|t| format!("{}[nt][c]", t.scores))
        .collect();
    let _ = writeln!(
        s,
        "{i}        row_max[c / 2] = fmaxf(row_max[c / 2], {});\n\
         {i}    }}\n\
         {i}}}\n\
         {i}}}",
        fold("fmaxf", &values)
    );
    let scores: Vec<&str> = tiles.iter().map(|t| t.scores).collect();
    s.push_str(&softmax::mma_sync_update(
        &scores,
        config.n_tiles(),
        partners,
        i,
    ));
    for t in tiles {
        s.push_str(&pv_product_for(config, t.scores, t.v_tile, t.p_regs));
    }
    Ok(s)
}

/// `S = Q·Kᵀ` for one 16-key tile: per pair of k16 steps, one 16-byte chunk of Q rows r
/// and r + 8 and of K rows r and 8 + r per lane (QK operand tiling), two MMAs per key
/// n-tile (qk_contraction order).
/// `S = Q·Kᵀ` for one or several 16-key tiles, `(scores, K tile)` each: the Q
/// chunks of each step pair are loaded once for all of them.
fn qk_product_for(config: DecodeConfig, targets: &[(&str, &str)]) -> String {
    let c = config.chunks_per_row();
    let mut s = String::from(
        "        // S = Q K^T, contraction order qk_contraction (operands.rs): chunk qk_lane + 4j of\n\
         \x20       // Q rows r, r + 8 and K rows r, 8 + r holds both k16 steps of pair j.\n",
    );
    for j in 0..config.head_dim / 32 {
        let _ = writeln!(
            s,
            "        {{  // step pair {j}: d {lo}..{hi}\n\
             \x20           const uint4 qa = fm_lds128(q_warp + fm_swizzle_qk(qk_lane + {o0}u) * 16u);  // row r\n\
             \x20           const uint4 qb = fm_lds128(q_warp + fm_swizzle_qk(qk_lane + {o1}u) * 16u);  // row r + 8",
            lo = 32 * j,
            hi = 32 * j + 31,
            o0 = 4 * j,
            o1 = 4 * j + 8 * c
        );
        for (nt, &(scores, k_tile)) in (0..2).flat_map(|nt| targets.iter().map(move |t| (nt, t))) {
            let _ = writeln!(
                s,
                "            {{\n\
                 \x20               const uint4 kk = fm_lds128({k_tile} + fm_swizzle_qk(qk_lane + {off}u) * 16u);  // key {nt8} + r",
                off = 4 * j + 8 * c * nt,
                nt8 = 8 * nt
            );
            for h in 0..2 {
                let word = |w: u32| ["x", "y", "z", "w"][w as usize];
                let a: Vec<String> = (0..4)
                    .map(|reg| {
                        let (plus8, w) = qk_a_source(h, reg);
                        format!("{}.{}", if plus8 { "qb" } else { "qa" }, word(w))
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "                fm_mma_16816({scores}[{nt}], {}, {}, {}, {}, kk.{}, kk.{});  // step {step}",
                    a[0],
                    a[1],
                    a[2],
                    a[3],
                    word(qk_b_source(h, 0)),
                    word(qk_b_source(h, 1)),
                    step = 2 * j + h
                );
            }
            s.push_str("            }\n");
        }
        s.push_str("        }\n");
    }
    s
}

/// `O += P·V` for one 16-key tile: P's A registers from S (p_source), V's B registers
/// from one 16-byte chunk of each of the rows 2q, 2q+1, 2q+8, 2q+9 (v_row) per 64
/// columns; element t of the chunks feeds n-tile 8g + t (o_columns).
/// [`pv_product`] with named operands: the scores `scores`, the V tile `v_tile`, and the
/// A registers `{p_regs}0..3` it declares (the paired tile body runs it twice).
fn pv_product_for(config: DecodeConfig, scores: &str, v_tile: &str, p_regs: &str) -> String {
    let c = config.chunks_per_row();
    let mut s = String::from(
        "        // P as the A operand: register i packs S's (tile i/2: c 2(i%2), 2(i%2)+1) (p_source)\n",
    );
    for reg in 0..4 {
        let (tile, c0) = p_source(reg);
        let _ = writeln!(
            s,
            "        const unsigned {p_regs}{reg} = fm_act2({scores}[{tile}][{c0}], {scores}[{tile}][{c1}]);",
            c1 = c0 + 1
        );
    }
    s.push_str(
        "        // O += P V: V rows v_row(q, reg, half) = 2q + half + 8 reg, chunk v_lane + 8g\n",
    );
    for g in 0..config.head_dim / 64 {
        let _ = writeln!(s, "        {{  // d {}..{}", 64 * g, 64 * g + 63);
        let mut names = Vec::new();
        for reg in 0..2 {
            for half in 0..2 {
                let row = v_row(0, reg, half);
                let name = format!("v{row}");
                let _ = writeln!(
                    s,
                    "            const uint4 {name} = fm_lds128({v_tile} + fm_swizzle_v(v_lane + {off}u) * 16u);  // row 2q + {row}",
                    off = row * c + 8 * g
                );
                names.push(name);
            }
        }
        for t in 0..8u32 {
            let word = ["x", "y", "z", "w"][(t / 2) as usize];
            let sel = if t % 2 == 0 { "0x5410u" } else { "0x7632u" };
            let _ = writeln!(
                s,
                "            fm_mma_16816(o[{nt}], {p_regs}0, {p_regs}1, {p_regs}2, {p_regs}3, __byte_perm({a}.{word}, {b}.{word}, {sel}), __byte_perm({c2}.{word}, {d2}.{word}, {sel}));",
                nt = 8 * g + t,
                a = names[0],
                b = names[1],
                c2 = names[2],
                d2 = names[3],
            );
        }
        s.push_str("        }\n");
    }
    s
}
