//! The CPU f64 reference of decode, and a CPU model of the kernel's split scheduler.

use core::ops::Range;

use fragmask_kernels::decode::{TILE_KEYS, TILE_ROWS};

use fragmask_host::decode::{CacheShape, DecodeMask, DecodeShape};

use super::merge::{attend, merge_states};

/// Host copies of the inputs, as f64 (the values the dtype holds).
#[derive(Clone, Debug, Default)]
pub struct ReferenceInputs {
    /// q `[B, Sq, H, D]`.
    pub q: Vec<f64>,
    /// k `[B, capacity, Hkv, D]` or `[num_pages, page_size, Hkv, D]`.
    pub k: Vec<f64>,
    /// v, as k.
    pub v: Vec<f64>,
    /// `[B, max_pages]` (empty when contiguous).
    pub block_table: Vec<i32>,
    /// `[B]`, or `None`: every request at capacity.
    pub seqlens_k: Option<Vec<i32>>,
}

impl ReferenceInputs {
    /// The key count of request `b`.
    pub fn seqlen_k(&self, shape: &DecodeShape, b: usize) -> usize {
        self.seqlens_k
            .as_ref()
            .map_or(shape.cache.capacity(), |l| l[b].max(0) as usize)
    }
}

/// The element offset of key `key` of KV head `hkv` of request `b` in k and v.
pub fn key_offset(
    shape: &DecodeShape,
    block_table: &[i32],
    b: usize,
    key: usize,
    hkv: usize,
) -> usize {
    let (hk, d) = (shape.kv_heads, shape.head_dim);
    match shape.cache {
        CacheShape::Contiguous { capacity } => ((b * capacity + key) * hk + hkv) * d,
        CacheShape::HeadMajor { capacity } => ((b * hk + hkv) * capacity + key) * d,
        CacheShape::Paged {
            page_size,
            max_pages,
            ..
        } => {
            let page = block_table[b * max_pages + key / page_size] as usize;
            ((page * page_size + key % page_size) * hk + hkv) * d
        }
    }
}

/// The keys token `t` of a request with `seqlen_k` keys sees: bottom-right aligned (token
/// t at position `seqlen_k − Sq + t`), within the window.
pub fn visible_keys(shape: &DecodeShape, seqlen_k: usize, t: usize) -> Range<usize> {
    let pos = seqlen_k as i64 - shape.seqlen_q as i64 + t as i64;
    let lo = shape.window_left.map_or(0, |w| (pos - w as i64).max(0));
    let hi = shape.window_right.map_or(seqlen_k as i64, |w| {
        (pos + w as i64 + 1).min(seqlen_k as i64)
    });
    let lo = lo.max(0) as usize;
    let hi = hi.max(0) as usize;
    lo..hi.max(lo)
}

/// The state `(o, lse)` of query row `(b, t, h)` over `keys`.
pub fn row_state(
    shape: &DecodeShape,
    inputs: &ReferenceInputs,
    b: usize,
    t: usize,
    h: usize,
    keys: impl IntoIterator<Item = usize>,
) -> (Vec<f64>, f64) {
    row_state_at(shape, inputs, b, b * shape.seqlen_q + t, h, keys)
}

/// [`row_state`] of the query in row `q_row` of q (as `[rows, H, D]`) for request b.
pub fn row_state_at(
    shape: &DecodeShape,
    inputs: &ReferenceInputs,
    b: usize,
    q_row: usize,
    h: usize,
    keys: impl IntoIterator<Item = usize>,
) -> (Vec<f64>, f64) {
    let d = shape.head_dim;
    let hkv = h / shape.group();
    let scale = shape.scale();
    let q0 = (q_row * shape.heads + h) * d;
    let q = &inputs.q[q0..q0 + d];
    let mut scores = Vec::new();
    let mut values = Vec::new();
    for key in keys {
        let off = key_offset(shape, &inputs.block_table, b, key, hkv);
        let k = &inputs.k[off..off + d];
        scores.push(scale * q.iter().zip(k).map(|(x, y)| x * y).sum::<f64>());
        values.push(&inputs.v[off..off + d]);
    }
    attend(&scores, &values, d)
}

/// o `[B, Sq, H, D]` and lse `[B, H, Sq]` in f64. A row with no visible key gives o = 0
/// and lse = −∞.
pub fn decode_reference(shape: &DecodeShape, inputs: &ReferenceInputs) -> (Vec<f64>, Vec<f64>) {
    decode_reference_masked(shape, inputs, None)
}

/// The reference of a call with variable query lengths: request b's tokens are rows
/// `cu[b] .. cu[b + 1]` of q `[total_q, H, D]`; token t of it sits at key position
/// `seqlen_k − (cu[b + 1] − cu[b]) + t`; the mask (if any) is indexed by t. Returns o
/// `[total_q, H, D]` and lse `[H, total_q]`, NaN in lse for rows no request covers.
pub fn decode_reference_varlen(
    shape: &DecodeShape,
    inputs: &ReferenceInputs,
    mask: Option<&DecodeMask>,
    cu: &[i32],
    total_q: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (h_n, d) = (shape.heads, shape.head_dim);
    let mut o = vec![0.0; total_q * h_n * d];
    let mut lse = vec![f64::NAN; h_n * total_q];
    for b in 0..shape.batch {
        let (start, end) = (cu[b].max(0) as usize, cu[b + 1].max(0) as usize);
        let sub = DecodeShape {
            seqlen_q: end.saturating_sub(start),
            ..*shape
        };
        let seqlen_k = inputs.seqlen_k(shape, b);
        for t in 0..sub.seqlen_q {
            for h in 0..h_n {
                let keys = visible_keys(&sub, seqlen_k, t)
                    .filter(|&key| mask.is_none_or(|m| m.get(b, h, t, key)));
                let (row_o, row_lse) = row_state_at(shape, inputs, b, start + t, h, keys);
                let at = ((start + t) * h_n + h) * d;
                o[at..at + d].copy_from_slice(&row_o);
                lse[h * total_q + start + t] = row_lse;
            }
        }
    }
    (o, lse)
}

/// [`decode_reference`] with a block-sparse mask: token t of request b, head h sees key
/// `key` when the causal / window bounds and `mask.get(b, h, t, key)` allow it.
pub fn decode_reference_masked(
    shape: &DecodeShape,
    inputs: &ReferenceInputs,
    mask: Option<&DecodeMask>,
) -> (Vec<f64>, Vec<f64>) {
    let (b_n, sq, h_n, d) = (shape.batch, shape.seqlen_q, shape.heads, shape.head_dim);
    let mut o = vec![0.0; b_n * sq * h_n * d];
    let mut lse = vec![0.0; b_n * h_n * sq];
    for b in 0..b_n {
        let seqlen_k = inputs.seqlen_k(shape, b);
        for t in 0..sq {
            for h in 0..h_n {
                let keys = visible_keys(shape, seqlen_k, t)
                    .filter(|&key| mask.is_none_or(|m| m.get(b, h, t, key)));
                let (row_o, row_lse) = row_state(shape, inputs, b, t, h, keys);
                let at = ((b * sq + t) * h_n + h) * d;
                o[at..at + d].copy_from_slice(&row_o);
                lse[(b * h_n + h) * sq + t] = row_lse;
            }
        }
    }
    (o, lse)
}

/// The key ranges the kernel's splits of m-block `m_block` read (in whole 16-key tiles,
/// before the per-element mask), as `fm_decode_split`'s scheduler computes them for CTAs
/// of `cta_rows` packed rows whose splits cut the tiles in steps of `step_tiles`
/// (`DecodeConfig::cta_rows`, `DecodeConfig::step_tiles`: 16 and 1, or 64 and 4 / 2 with
/// shared K/V).
pub fn split_key_ranges(
    shape: &DecodeShape,
    seqlen_k: usize,
    m_block: usize,
    num_splits: usize,
    (cta_rows, step_tiles): (usize, usize),
) -> Vec<Range<usize>> {
    let (g, rows) = (shape.group(), shape.rows());
    let row0 = m_block * cta_rows;
    let t_first = row0 / g;
    let t_last = (row0 + cta_rows - 1).min(rows - 1) / g;
    let lo = visible_keys(shape, seqlen_k, t_first).start;
    let hi = visible_keys(shape, seqlen_k, t_last).end;
    let tk = TILE_KEYS as usize;
    let tile_lo = lo / tk;
    let tiles = if hi > lo {
        hi.div_ceil(tk) - tile_lo
    } else {
        0
    };
    let steps = tiles.div_ceil(step_tiles);
    (0..num_splits)
        .map(|s| {
            let first = (tile_lo + steps * s / num_splits * step_tiles).min(tile_lo + tiles);
            let end = (tile_lo + steps * (s + 1) / num_splits * step_tiles).min(tile_lo + tiles);
            (first * tk)..(end * tk)
        })
        .collect()
}

/// The reference computed the kernel's way: each split's keys (clipped to the row's
/// visible keys) give a state, and the states are merged with
/// [`merge_states`].
pub fn decode_reference_split(
    shape: &DecodeShape,
    inputs: &ReferenceInputs,
    num_splits: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (b_n, sq, h_n, d) = (shape.batch, shape.seqlen_q, shape.heads, shape.head_dim);
    let g = shape.group();
    let mut o = vec![0.0; b_n * sq * h_n * d];
    let mut lse = vec![0.0; b_n * h_n * sq];
    let cta = shape.config().map_or((TILE_ROWS as usize, 1), |c| {
        (c.cta_rows() as usize, c.step_tiles() as usize)
    });
    for b in 0..b_n {
        let seqlen_k = inputs.seqlen_k(shape, b);
        for t in 0..sq {
            for h in 0..h_n {
                let m_block = (t * g + h % g) / cta.0;
                let visible = visible_keys(shape, seqlen_k, t);
                let mut acc = (vec![0.0; d], vec![f64::NEG_INFINITY]);
                for range in split_key_ranges(shape, seqlen_k, m_block, num_splits, cta) {
                    let keys = range.start.max(visible.start)..range.end.min(visible.end);
                    let keys = keys.start..keys.end.max(keys.start);
                    let (po, pl) = row_state(shape, inputs, b, t, h, keys);
                    acc = merge_states((&acc.0, &acc.1), (&po, &[pl]))
                        .unwrap_or_else(|_| (vec![f64::NAN; d], vec![f64::NAN]));
                }
                let at = ((b * sq + t) * h_n + h) * d;
                o[at..at + d].copy_from_slice(&acc.0);
                lse[(b * h_n + h) * sq + t] = acc.1[0];
            }
        }
    }
    (o, lse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::splitmix64;
    use fragmask_kernels::family::dtype::ActDtype;
    use proptest::prelude::*;

    #[test]
    fn varlen_reference_equals_each_request_run_alone() {
        // 3 requests of 4, 0 and 2 tokens in q rows 0..6 (rows 6, 7 uncovered), causal.
        let mut seed = 3u64;
        let shape = DecodeShape {
            batch: 3,
            seqlen_q: 4,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            dtype: ActDtype::Bf16,
            cache: CacheShape::Contiguous { capacity: 40 },
            window_left: Some(9),
            window_right: Some(0),
            softmax_scale: None,
        };
        let (h, d) = (4, 64);
        let inputs = ReferenceInputs {
            q: uniform(8 * h * d, &mut seed),
            k: uniform(3 * 40 * 2 * d, &mut seed),
            v: uniform(3 * 40 * 2 * d, &mut seed),
            block_table: vec![],
            seqlens_k: Some(vec![40, 17, 5]),
        };
        let cu = [0, 4, 4, 6];
        let (o, lse) = decode_reference_varlen(&shape, &inputs, None, &cu, 8);
        for (b, start, n) in [(0usize, 0usize, 4usize), (2, 4, 2)] {
            let alone = DecodeShape {
                batch: 1,
                seqlen_q: n,
                cache: CacheShape::Contiguous { capacity: 40 },
                ..shape
            };
            let k0 = b * 40 * 2 * d;
            let one = ReferenceInputs {
                q: inputs.q[start * h * d..(start + n) * h * d].to_vec(),
                k: inputs.k[k0..k0 + 40 * 2 * d].to_vec(),
                v: inputs.v[k0..k0 + 40 * 2 * d].to_vec(),
                block_table: vec![],
                seqlens_k: Some(vec![inputs.seqlens_k.as_ref().unwrap()[b]]),
            };
            let (ro, rl) = decode_reference(&alone, &one);
            assert_eq!(&o[start * h * d..(start + n) * h * d], &ro[..]);
            for head in 0..h {
                for t in 0..n {
                    assert_eq!(lse[head * 8 + start + t], rl[head * n + t]);
                }
            }
        }
        assert!((0..h).all(|head| lse[head * 8 + 6].is_nan() && lse[head * 8 + 7].is_nan()));
    }

    fn uniform(n: usize, seed: &mut u64) -> Vec<f64> {
        (0..n)
            .map(|_| (splitmix64(seed) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn problem(
        batch: usize,
        sq: usize,
        heads: usize,
        kv_heads: usize,
        page_size: Option<usize>,
        capacity: usize,
        window: (Option<usize>, Option<usize>),
        seed: u64,
    ) -> (DecodeShape, ReferenceInputs) {
        let mut seed = seed;
        let d = 64;
        let cache = match page_size {
            None => CacheShape::Contiguous { capacity },
            Some(ps) => CacheShape::Paged {
                page_size: ps,
                num_pages: batch * capacity.div_ceil(ps),
                max_pages: capacity.div_ceil(ps),
            },
        };
        let shape = DecodeShape {
            batch,
            seqlen_q: sq,
            heads,
            kv_heads,
            head_dim: d,
            dtype: ActDtype::Bf16,
            cache,
            window_left: window.0,
            window_right: window.1,
            softmax_scale: None,
        };
        let kv = shape.dims("k").iter().product();
        let mut block_table: Vec<i32> =
            (0..shape.elements("block_table").unwrap() as i32).collect();
        // Reverse each request's pages, so a wrong page shows.
        block_table.reverse();
        let lens = (0..batch)
            .map(|_| (splitmix64(&mut seed) % (capacity as u64 + 1)) as i32)
            .collect();
        let inputs = ReferenceInputs {
            q: uniform(batch * sq * heads * d, &mut seed),
            k: uniform(kv, &mut seed),
            v: uniform(kv, &mut seed),
            block_table,
            seqlens_k: Some(lens),
        };
        (shape, inputs)
    }

    proptest! {
        #![proptest_config(crate::proptest_ci::config(48))]

        /// The kernel's split schedule, merged with `merge_states`, equals the unsplit
        /// reference for any split count, GQA ratio, length, page size and window.
        #[test]
        fn the_split_schedule_merged_equals_the_unsplit_reference(
            batch in 1usize..3, sq in 1usize..6, group in prop::sample::select(vec![1usize, 4, 8]),
            kv_heads in 1usize..3, page in prop::sample::select(vec![None, Some(1), Some(16), Some(64)]),
            capacity in 1usize..200, splits in 1usize..9,
            left in prop::option::of(0usize..70), right in prop::option::of(0usize..3), seed in any::<u64>(),
        ) {
            let (shape, inputs) = problem(batch, sq, group * kv_heads, kv_heads, page, capacity, (left, right), seed);
            let (o, lse) = decode_reference(&shape, &inputs);
            let (os, lses) = decode_reference_split(&shape, &inputs, splits);
            for (x, y) in o.iter().zip(&os) {
                prop_assert!((x - y).abs() <= 1e-12, "{x} vs {y}");
            }
            for (x, y) in lse.iter().zip(&lses) {
                prop_assert!(x == y || (x - y).abs() <= 1e-12, "{x} vs {y}");
            }
        }

        /// The splits' key ranges are disjoint, in order, and cover every key any row of
        /// the m-block sees.
        #[test]
        fn split_ranges_partition_the_visible_keys_of_the_block(
            sq in 1usize..40, group in prop::sample::select(vec![1usize, 2, 4, 8]),
            seqlen in 0usize..500, splits in 1usize..17,
            left in prop::option::of(0usize..300), right in prop::option::of(0usize..3),
            cta in prop::sample::select(vec![(16usize, 1usize), (64, 4), (64, 2)]),
        ) {
            let (shape, _) = problem(1, sq, group, 1, None, 512, (left, right), 1);
            for m_block in 0..shape.rows().div_ceil(cta.0) {
                let ranges = split_key_ranges(&shape, seqlen, m_block, splits, cta);
                for w in ranges.windows(2) {
                    prop_assert_eq!(w[0].end, w[1].start);
                }
                // Each range is well formed (a split may be empty).
                for r in &ranges {
                    prop_assert!(r.start <= r.end);
                }
                let (first, last) = (ranges[0].start, ranges[splits - 1].end);
                let row0 = m_block * cta.0;
                for row in row0..(row0 + cta.0).min(shape.rows()) {
                    let vis = visible_keys(&shape, seqlen, row / group);
                    if !vis.is_empty() {
                        prop_assert!(first <= vis.start && vis.end <= last);
                    }
                }
            }
        }
    }

    #[test]
    fn rows_with_no_visible_key_give_zero_and_minus_infinity() {
        // Causal with 2 new tokens and 1 key: token 0 sits at position -1 and sees nothing.
        let (shape, mut inputs) = problem(1, 2, 4, 1, Some(16), 32, (None, Some(0)), 7);
        inputs.seqlens_k = Some(vec![1]);
        let (o, lse) = decode_reference(&shape, &inputs);
        for h in 0..4 {
            assert_eq!(lse[h * 2], f64::NEG_INFINITY);
            assert!(lse[h * 2 + 1].is_finite());
            assert!(o[h * 64..(h + 1) * 64].iter().all(|&x| x == 0.0));
        }
    }
}
