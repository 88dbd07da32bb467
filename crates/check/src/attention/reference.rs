//! CPU f64 references of the masked attention forward and backward, for small shapes.
//!
//! The backward is the one the backward kernels will be checked against (issue 13;
//! docs/backward.md): `dV = Pᵀ dO`, `dS = P ∘ (dP − D)` with `dP = dO Vᵀ` and
//! `D = rowsum(dO ∘ O)`, `dQ = scale · dS K`, `dK = scale · dSᵀ Q`, summed over the query
//! heads that share a K/V head (FlashAttention-2, Dao 2023, Algorithm 2).

use fragmask_host::attention::AttentionShape;

/// Reference output: `o` is `[B, H, Sq, D]`, `lse` is `[B, H, Sq]` (natural log).
#[derive(Debug, Clone)]
pub struct ReferenceOutput {
    /// Attention output.
    pub o: Vec<f64>,
    /// Row log-sum-exp of the scaled scores; `-inf` for rows with no visible key.
    pub lse: Vec<f64>,
}

/// `O = softmax(scale * Q K^T, masked) V` in f64. `visible(b, h, i, j)` says
/// whether query `i` of head `h` sees key `j`. Rows with no visible key get
/// `O = 0` and `lse = -inf` (the kernel's convention). K/V head of query head
/// `h` is `h / (heads / kv_heads)`.
pub fn attention_reference(
    shape: &AttentionShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    scale: f64,
    visible: impl Fn(usize, usize, usize, usize) -> bool,
) -> ReferenceOutput {
    forward_f64(shape, &widen(q), &widen(k), &widen(v), scale, &visible)
}

fn widen(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&a| f64::from(a)).collect()
}

/// The softmax row of query `i` of `(b, h)`: `p[j]` normalised over the visible keys
/// (all 0 when none is visible) and the row's log-sum-exp (`-inf` then).
fn probabilities(
    shape: &AttentionShape,
    q: &[f64],
    k: &[f64],
    scale: f64,
    visible: &impl Fn(usize, usize, usize, usize) -> bool,
    (b, h, i): (usize, usize, usize),
    p: &mut [f64],
) -> f64 {
    let d = shape.head_dim;
    let hk = h / (shape.heads / shape.kv_heads);
    let qi = &q[((b * shape.heads + h) * shape.seqlen_q + i) * d..][..d];
    let kv_base = (b * shape.kv_heads + hk) * shape.seqlen_k * d;
    let mut max = f64::NEG_INFINITY;
    for (j, score) in p.iter_mut().enumerate() {
        *score = if visible(b, h, i, j) {
            let kj = &k[kv_base + j * d..][..d];
            let s = qi.iter().zip(kj).map(|(a, c)| a * c).sum::<f64>() * scale;
            max = max.max(s);
            s
        } else {
            f64::NEG_INFINITY
        };
    }
    if max == f64::NEG_INFINITY {
        p.iter_mut().for_each(|x| *x = 0.0);
        return f64::NEG_INFINITY;
    }
    let mut sum = 0.0;
    for x in p.iter_mut() {
        *x = if *x == f64::NEG_INFINITY {
            0.0
        } else {
            (*x - max).exp()
        };
        sum += *x;
    }
    p.iter_mut().for_each(|x| *x /= sum);
    max + sum.ln()
}

/// Gradients of the attention inputs: `dq` `[B, H, Sq, D]`, `dk` and `dv`
/// `[B, Hkv, Sk, D]` (summed over the query heads of each K/V head).
#[derive(Debug, Clone)]
pub struct ReferenceGrads {
    /// dL/dQ.
    pub dq: Vec<f64>,
    /// dL/dK.
    pub dk: Vec<f64>,
    /// dL/dV.
    pub dv: Vec<f64>,
}

/// The backward of [`attention_reference`] in f64 for the output gradient `d_o`
/// (`[B, H, Sq, D]`): rows with no visible key contribute nothing, so their dQ is 0 and
/// keys no query sees get dK = dV = 0.
pub fn attention_backward_reference(
    shape: &AttentionShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    d_o: &[f32],
    scale: f64,
    visible: impl Fn(usize, usize, usize, usize) -> bool,
) -> ReferenceGrads {
    backward_f64(
        shape,
        [&widen(q), &widen(k), &widen(v), &widen(d_o)],
        scale,
        &visible,
    )
}

fn backward_f64(
    shape: &AttentionShape,
    [q, k, v, d_o]: [&[f64]; 4],
    scale: f64,
    visible: &impl Fn(usize, usize, usize, usize) -> bool,
) -> ReferenceGrads {
    let s = *shape;
    let d = s.head_dim;
    let group = s.heads / s.kv_heads;
    let mut dq = vec![0.0; q.len()];
    let mut dk = vec![0.0; k.len()];
    let mut dv = vec![0.0; v.len()];
    let mut p = vec![0.0; s.seqlen_k];
    let mut o = vec![0.0; d];
    for b in 0..s.batch {
        for h in 0..s.heads {
            let kv_base = (b * s.kv_heads + h / group) * s.seqlen_k * d;
            for i in 0..s.seqlen_q {
                let row = ((b * s.heads + h) * s.seqlen_q + i) * d;
                if probabilities(&s, q, k, scale, visible, (b, h, i), &mut p) == f64::NEG_INFINITY {
                    continue;
                }
                // O_i and D_i = dO_i · O_i.
                o.iter_mut().for_each(|x| *x = 0.0);
                for (j, &pj) in p.iter().enumerate() {
                    for (x, vj) in o.iter_mut().zip(&v[kv_base + j * d..][..d]) {
                        *x += pj * vj;
                    }
                }
                let doi = &d_o[row..row + d];
                let delta: f64 = doi.iter().zip(&o).map(|(a, c)| a * c).sum();
                for (j, &pj) in p.iter().enumerate() {
                    if pj == 0.0 {
                        continue;
                    }
                    let key = kv_base + j * d;
                    let dp: f64 = doi.iter().zip(&v[key..key + d]).map(|(a, c)| a * c).sum();
                    let ds = pj * (dp - delta) * scale;
                    for t in 0..d {
                        dv[key + t] += pj * doi[t];
                        dq[row + t] += ds * k[key + t];
                        dk[key + t] += ds * q[row + t];
                    }
                }
            }
        }
    }
    ReferenceGrads { dq, dk, dv }
}

fn forward_f64(
    shape: &AttentionShape,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    scale: f64,
    visible: &impl Fn(usize, usize, usize, usize) -> bool,
) -> ReferenceOutput {
    let AttentionShape {
        batch,
        heads,
        kv_heads,
        seqlen_q,
        seqlen_k,
        head_dim,
    } = *shape;
    let group = heads / kv_heads;
    let mut o = vec![0.0f64; batch * heads * seqlen_q * head_dim];
    let mut lse = vec![f64::NEG_INFINITY; batch * heads * seqlen_q];
    let mut scores = vec![0.0f64; seqlen_k];
    for b in 0..batch {
        for h in 0..heads {
            let hk = h / group;
            let q_base = (b * heads + h) * seqlen_q * head_dim;
            let kv_base = (b * kv_heads + hk) * seqlen_k * head_dim;
            for i in 0..seqlen_q {
                let qi = &q[q_base + i * head_dim..q_base + (i + 1) * head_dim];
                let mut max = f64::NEG_INFINITY;
                for (j, score) in scores.iter_mut().enumerate() {
                    if visible(b, h, i, j) {
                        let kj = &k[kv_base + j * head_dim..kv_base + (j + 1) * head_dim];
                        let dot: f64 = qi.iter().zip(kj).map(|(&a, &c)| a * c).sum();
                        *score = dot * scale;
                        max = max.max(*score);
                    } else {
                        *score = f64::NEG_INFINITY;
                    }
                }
                if max == f64::NEG_INFINITY {
                    continue;
                }
                let mut sum = 0.0;
                for score in scores.iter_mut() {
                    *score = if *score == f64::NEG_INFINITY {
                        0.0
                    } else {
                        (*score - max).exp()
                    };
                    sum += *score;
                }
                let out = &mut o[q_base + i * head_dim..q_base + (i + 1) * head_dim];
                for (j, &p) in scores.iter().enumerate() {
                    if p == 0.0 {
                        continue;
                    }
                    let vj = &v[kv_base + j * head_dim..kv_base + (j + 1) * head_dim];
                    for (acc, &x) in out.iter_mut().zip(vj) {
                        *acc += p * x;
                    }
                }
                for acc in out.iter_mut() {
                    *acc /= sum;
                }
                lse[(b * heads + h) * seqlen_q + i] = max + sum.ln();
            }
        }
    }
    ReferenceOutput { o, lse }
}

#[cfg(test)]
use crate::proptest_ci;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn small(heads: usize, kv_heads: usize, sq: usize, sk: usize, d: usize) -> AttentionShape {
        AttentionShape {
            batch: 1,
            heads,
            kv_heads,
            seqlen_q: sq,
            seqlen_k: sk,
            head_dim: d,
        }
    }

    /// `Σ dO ∘ O`, whose gradient the backward computes.
    fn loss(
        s: &AttentionShape,
        [q, k, v, d_o]: [&[f64]; 4],
        scale: f64,
        visible: &impl Fn(usize, usize, usize, usize) -> bool,
    ) -> f64 {
        let r = forward_f64(s, q, k, v, scale, visible);
        r.o.iter().zip(d_o).map(|(a, b)| a * b).sum()
    }

    proptest! {
        #![proptest_config(super::proptest_ci::config(32))]
        /// Each gradient element equals the central difference of `Σ dO ∘ O` in that
        /// input (GQA shapes, random masks with fully masked rows and unseen keys).
        #[test]
        fn backward_gradients_equal_central_differences_of_the_forward(
            (heads, kv_heads) in prop_oneof![Just((1usize, 1usize)), Just((2, 1)), Just((2, 2))],
            sq in 1usize..4,
            sk in 1usize..5,
            d in 1usize..4,
            seed in any::<u64>(),
            keep in 0u64..=100,
        ) {
            let s = small(heads, kv_heads, sq, sk, d);
            let mut state = seed | 1;
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            };
            let q: Vec<f64> = (0..heads * sq * d).map(|_| next() * 2.0 - 1.0).collect();
            let k: Vec<f64> = (0..kv_heads * sk * d).map(|_| next() * 2.0 - 1.0).collect();
            let v: Vec<f64> = (0..kv_heads * sk * d).map(|_| next() * 2.0 - 1.0).collect();
            let d_o: Vec<f64> = (0..heads * sq * d).map(|_| next() * 2.0 - 1.0).collect();
            let bits: Vec<bool> = (0..heads * sq * sk).map(|_| next() * 100.0 < keep as f64).collect();
            let visible = |_b: usize, h: usize, i: usize, j: usize| bits[(h * sq + i) * sk + j];
            let scale = 0.7;
            let g = backward_f64(&s, [&q, &k, &v, &d_o], scale, &visible);
            let step = 1e-5;
            for which in 0..3 {
                let base = [&q, &k, &v][which];
                let grad = [&g.dq, &g.dk, &g.dv][which];
                for e in 0..base.len() {
                    let at = |x: f64| {
                        let mut t = base.clone();
                        t[e] = x;
                        let inputs: [&[f64]; 4] = match which {
                            0 => [&t, &k, &v, &d_o],
                            1 => [&q, &t, &v, &d_o],
                            _ => [&q, &k, &t, &d_o],
                        };
                        loss(&s, inputs, scale, &visible)
                    };
                    let fd = (at(base[e] + step) - at(base[e] - step)) / (2.0 * step);
                    prop_assert!(
                        (fd - grad[e]).abs() <= 1e-6 * grad[e].abs().max(1.0),
                        "input {which} element {e}: central difference {fd}, backward {}", grad[e]
                    );
                }
            }
        }
    }

    #[test]
    fn masked_rows_and_unseen_keys_get_zero_gradients() {
        let s = small(1, 1, 2, 3, 2);
        let q = [0.3f32, -0.2, 0.5, 0.1];
        let k = [0.2f32, 0.4, -0.3, 0.1, 0.9, -0.5];
        let v = [1.0f32, 2.0, -1.0, 0.5, 3.0, 0.0];
        let d_o = [0.7f32, -0.3, 0.2, 0.4];
        // Row 1 sees nothing; key 2 is seen by nobody.
        let g =
            attention_backward_reference(&s, &q, &k, &v, &d_o, 0.5, |_, _, i, j| i == 0 && j < 2);
        assert_eq!(&g.dq[2..4], &[0.0, 0.0]);
        assert_eq!(&g.dk[4..6], &[0.0, 0.0]);
        assert_eq!(&g.dv[4..6], &[0.0, 0.0]);
        assert!(g.dq[..2].iter().any(|&x| x != 0.0));
        // dV of a visible key is P_ij dO_i: the probabilities of row 0 sum to 1.
        let dv_sum: f64 = g.dv[0] + g.dv[2];
        assert!((dv_sum - f64::from(0.7f32)).abs() < 1e-12, "{dv_sum}");
    }

    #[test]
    fn uniform_scores_average_the_visible_values() {
        let shape = AttentionShape {
            batch: 1,
            heads: 1,
            kv_heads: 1,
            seqlen_q: 2,
            seqlen_k: 3,
            head_dim: 1,
        };
        let q = [0.0f32, 0.0];
        let k = [1.0f32, 2.0, 3.0];
        let v = [1.0f32, 2.0, 6.0];
        // Row 0 sees keys 0 and 1, row 1 sees nothing.
        let r = attention_reference(&shape, &q, &k, &v, 1.0, |_, _, i, j| i == 0 && j < 2);
        assert!((r.o[0] - 1.5).abs() < 1e-12);
        assert!((r.lse[0] - 2f64.ln()).abs() < 1e-12);
        assert_eq!(r.o[1], 0.0);
        assert_eq!(r.lse[1], f64::NEG_INFINITY);
    }
}
