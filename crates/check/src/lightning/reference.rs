//! The CPU f64 reference of lightning decode, the write-up's loop in double precision:
//! for each token `t`, `kv = exp(−slope_h)·kv + k_tᵀ v_t`, then `o_t = q_t · kv`.

use fragmask_kernels::lightning::LightningProblem;

/// Runs `problem.tokens` tokens on `state` (`[B, H, D, E]`, updated in place) and
/// returns `o` (`[B, H, n, E]`). `q`, `k` are `[B, H, n, D]`, `v` is `[B, H, n, E]`,
/// `slopes` is `[H]`; the slices must have those lengths (checked by the caller through
/// [`LightningProblem::check_shape`]).
pub fn lightning_reference(
    problem: &LightningProblem,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    state: &mut [f64],
    slopes: &[f64],
) -> Vec<f64> {
    let (h_n, n, d_n, e_n) = (problem.heads, problem.tokens, problem.dim_k, problem.dim_v);
    let mut o = vec![0.0; problem.batch * h_n * n * e_n];
    for bh in 0..problem.batch * h_n {
        let ratio = (-slopes[bh % h_n]).exp();
        let kv = &mut state[bh * d_n * e_n..(bh + 1) * d_n * e_n];
        for t in 0..n {
            let qk_at = (bh * n + t) * d_n;
            let v_at = (bh * n + t) * e_n;
            let out = &mut o[v_at..v_at + e_n];
            for d in 0..d_n {
                let (kd, qd) = (k[qk_at + d], q[qk_at + d]);
                let row = &mut kv[d * e_n..(d + 1) * e_n];
                for e in 0..e_n {
                    row[e] = ratio * row[e] + kd * v[v_at + e];
                    out[e] += qd * row[e];
                }
            }
        }
    }
    o
}

/// `‖a − b‖₂ / ‖b‖₂` (`‖a − b‖₂` when `b` is zero); infinite if any value is not finite.
pub fn relative_error(a: &[f64], b: &[f64]) -> f64 {
    let (mut diff, mut norm) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        if !x.is_finite() || !y.is_finite() {
            return f64::INFINITY;
        }
        diff += (x - y) * (x - y);
        norm += y * y;
    }
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    if norm == 0.0 {
        diff.sqrt()
    } else {
        (diff / norm).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fragmask_kernels::family::dtype::ActDtype;

    fn problem(tokens: usize) -> LightningProblem {
        LightningProblem {
            batch: 1,
            heads: 2,
            tokens,
            dim_k: 2,
            dim_v: 3,
            dtype: ActDtype::F32,
        }
    }

    #[test]
    fn one_token_decays_then_adds_the_outer_product() {
        let p = problem(1);
        let mut state = vec![1.0; 12];
        let q = [1.0, 0.0, 0.0, 2.0];
        let k = [1.0, 2.0, 3.0, 4.0];
        let v = [1.0, 1.0, 1.0, 0.5, 0.5, 0.5];
        let slopes = [0.0, 2.0_f64.ln()];
        let o = lightning_reference(&p, &q, &k, &v, &mut state, &slopes);
        // head 0: ratio 1, kv = 1 + k_d v_e = rows [2,2,2], [3,3,3]; o = q0 * row0 = 2.
        assert_eq!(&state[..6], &[2.0, 2.0, 2.0, 3.0, 3.0, 3.0]);
        assert_eq!(&o[..3], &[2.0, 2.0, 2.0]);
        // head 1: ratio 1/2, kv = 0.5 + k_d * 0.5: rows [2,2,2], [2.5,2.5,2.5]; o = 2 * row1.
        assert_eq!(&state[6..], &[2.0, 2.0, 2.0, 2.5, 2.5, 2.5]);
        assert_eq!(&o[3..], &[5.0, 5.0, 5.0]);
    }

    #[test]
    fn n_tokens_equal_n_single_token_steps() {
        let p2 = problem(2);
        let p1 = problem(1);
        let q: Vec<f64> = (0..8).map(|i| f64::from(i) * 0.25 - 1.0).collect();
        let k: Vec<f64> = (0..8).map(|i| f64::from(i % 3) - 0.5).collect();
        let v: Vec<f64> = (0..12).map(|i| f64::from(i % 5) * 0.3).collect();
        let slopes = [0.1, 0.7];
        let mut together = vec![0.5; 12];
        let o2 = lightning_reference(&p2, &q, &k, &v, &mut together, &slopes);
        let mut stepwise = vec![0.5; 12];
        for t in 0..2 {
            let pick = |x: &[f64], w: usize| -> Vec<f64> {
                (0..2)
                    .flat_map(|h| x[(h * 2 + t) * w..(h * 2 + t + 1) * w].to_vec())
                    .collect()
            };
            let o1 = lightning_reference(
                &p1,
                &pick(&q, 2),
                &pick(&k, 2),
                &pick(&v, 3),
                &mut stepwise,
                &slopes,
            );
            for h in 0..2 {
                assert_eq!(
                    &o1[h * 3..h * 3 + 3],
                    &o2[(h * 2 + t) * 3..(h * 2 + t) * 3 + 3]
                );
            }
        }
        assert_eq!(together, stepwise);
    }

    #[test]
    fn relative_error_rejects_nan_and_length_mismatch() {
        assert_eq!(relative_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!(relative_error(&[f64::NAN], &[1.0]).is_infinite());
        assert!(relative_error(&[1.0], &[1.0, 2.0]).is_infinite());
    }
}
