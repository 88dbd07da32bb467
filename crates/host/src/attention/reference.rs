//! CPU f64 reference of the masked attention forward, for small shapes.

use super::AttentionShape;

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
                        let dot: f64 = qi
                            .iter()
                            .zip(kj)
                            .map(|(&a, &c)| f64::from(a) * f64::from(c))
                            .sum();
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
                        *acc += p * f64::from(x);
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
mod tests {
    use super::*;

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
