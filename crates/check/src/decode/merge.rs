//! `merge_states`: the LSE merge of two partial attention results, in f64 on the CPU.
//!
//! A partial result over a subset of the keys is `(o, lse)` per query row: `o` the
//! softmax-weighted mean of the subset's values, `lse = log Σ exp(score)` over the
//! subset (natural log). Two disjoint subsets merge exactly:
//!
//! ```text
//! M = max(lse_a, lse_b)   w_a = exp(lse_a − M)   w_b = exp(lse_b − M)
//! o = (w_a o_a + w_b o_b) / (w_a + w_b)          lse = M + log(w_a + w_b)
//! ```
//!
//! An empty subset is `(o = 0, lse = −∞)` and is the identity. This is the math of
//! split-KV decode's combine (`fragmask_kernels::family::combine`, which merges
//! `num_splits` partials the same way) and of a context-parallel merge. No GPU needed.

/// Why two states cannot be merged.
#[derive(Clone, Debug, PartialEq)]
pub enum MergeError {
    /// The two states' shapes differ, or `o` is not `rows × dim`.
    Shape {
        /// Which operand (`a` or `b`).
        operand: &'static str,
        /// Elements of its `o`.
        o_len: usize,
        /// Rows (elements of its `lse`).
        rows: usize,
        /// The head size of the other operand, or of `a`.
        dim: usize,
    },
    /// An lse is NaN or +∞ (−∞, an empty subset, is allowed).
    Lse {
        /// Which operand.
        operand: &'static str,
        /// The row.
        row: usize,
        /// Its value.
        value: f64,
    },
}

impl core::fmt::Display for MergeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MergeError::Shape {
                operand,
                o_len,
                rows,
                dim,
            } => write!(
                f,
                "state {operand}: o holds {o_len} values for {rows} rows, expected {rows} x {dim}"
            ),
            MergeError::Lse {
                operand,
                row,
                value,
            } => write!(
                f,
                "state {operand}: lse of row {row} is {value}; it must be finite or -inf"
            ),
        }
    }
}

impl std::error::Error for MergeError {}

/// A partial result: `o` `[rows, dim]` row-major and `lse` `[rows]`.
pub type State = (Vec<f64>, Vec<f64>);

/// The empty state of `rows` rows of `dim` columns: `o = 0`, `lse = −∞`.
pub fn empty_state(rows: usize, dim: usize) -> State {
    (vec![0.0; rows * dim], vec![f64::NEG_INFINITY; rows])
}

/// Merges row `(o_a, lse_a)` with `(o_b, lse_b)` into `out` (`o_a.len()` columns);
/// returns the merged lse. Expects `lse` finite or −∞ (checked by [`merge_states`]).
pub fn merge_row(o_a: &[f64], lse_a: f64, o_b: &[f64], lse_b: f64, out: &mut [f64]) -> f64 {
    let max = lse_a.max(lse_b);
    if max == f64::NEG_INFINITY {
        out.iter_mut().for_each(|x| *x = 0.0);
        return f64::NEG_INFINITY;
    }
    let (w_a, w_b) = ((lse_a - max).exp(), (lse_b - max).exp());
    let sum = w_a + w_b;
    for ((x, a), b) in out.iter_mut().zip(o_a).zip(o_b) {
        *x = (w_a * a + w_b * b) / sum;
    }
    max + sum.ln()
}

/// `merge_states((o_a, lse_a), (o_b, lse_b))`: the result over the union of two disjoint
/// key subsets from the results over each. `o_*` is `[rows, dim]` row-major and
/// `lse_*` is `[rows]`, with `rows = lse_a.len()` and `dim = o_a.len() / rows`.
///
/// ```
/// use fragmask_check::decode::merge::{empty_state, merge_states};
/// let a = (vec![1.0, 2.0], vec![0.5]);
/// let (o, lse) = merge_states((&a.0, &a.1), (&empty_state(1, 2).0, &[f64::NEG_INFINITY])).unwrap();
/// assert_eq!((o, lse), a); // an empty subset is the identity
/// ```
pub fn merge_states(a: (&[f64], &[f64]), b: (&[f64], &[f64])) -> Result<State, MergeError> {
    let rows = a.1.len();
    let dim = a.0.len().checked_div(rows).unwrap_or(0);
    for (operand, (o, lse)) in [("a", a), ("b", b)] {
        if lse.len() != rows || o.len() != rows * dim {
            return Err(MergeError::Shape {
                operand,
                o_len: o.len(),
                rows: lse.len(),
                dim,
            });
        }
        if let Some(row) = lse.iter().position(|x| x.is_nan() || *x == f64::INFINITY) {
            return Err(MergeError::Lse {
                operand,
                row,
                value: lse[row],
            });
        }
    }
    let mut o = vec![0.0; rows * dim];
    let mut lse = vec![0.0; rows];
    for (r, lse_r) in lse.iter_mut().enumerate() {
        let span = r * dim..(r + 1) * dim;
        *lse_r = merge_row(
            &a.0[span.clone()],
            a.1[r],
            &b.0[span.clone()],
            b.1[r],
            &mut o[span],
        );
    }
    Ok((o, lse))
}

/// The partial result of one query row over a subset of keys: `scores[j]` (already
/// scaled) and `values[j]` (`dim` each). Empty subsets give `(0, −∞)`.
pub fn attend(scores: &[f64], values: &[&[f64]], dim: usize) -> (Vec<f64>, f64) {
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if scores.is_empty() || max == f64::NEG_INFINITY {
        return (vec![0.0; dim], f64::NEG_INFINITY);
    }
    let mut o = vec![0.0; dim];
    let mut sum = 0.0;
    for (s, v) in scores.iter().zip(values) {
        let p = (s - max).exp();
        sum += p;
        for (x, y) in o.iter_mut().zip(v.iter()) {
            *x += p * y;
        }
    }
    o.iter_mut().for_each(|x| *x /= sum);
    (o, max + sum.ln())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows of random scores and values: `(rows, keys, dim, scores [rows][keys], values [keys][dim])`.
    fn problem() -> impl Strategy<Value = (usize, usize, Vec<f64>, Vec<f64>)> {
        (1usize..4, 0usize..24, 1usize..6).prop_flat_map(|(rows, keys, dim)| {
            (
                Just(rows),
                Just(dim),
                proptest::collection::vec(-8.0f64..8.0, rows * keys),
                proptest::collection::vec(-3.0f64..3.0, keys * dim),
            )
        })
    }

    /// The state of every row over keys `range`.
    fn state(
        rows: usize,
        dim: usize,
        scores: &[f64],
        values: &[f64],
        range: core::ops::Range<usize>,
    ) -> State {
        let keys = values.len() / dim;
        let mut o = Vec::new();
        let mut lse = Vec::new();
        for r in 0..rows {
            let s = &scores[r * keys + range.start..r * keys + range.end];
            let v: Vec<&[f64]> = range
                .clone()
                .map(|j| &values[j * dim..(j + 1) * dim])
                .collect();
            let (row_o, row_lse) = attend(s, &v, dim);
            o.extend(row_o);
            lse.push(row_lse);
        }
        (o, lse)
    }

    fn close(a: &State, b: &State) -> bool {
        let o =
            a.0.iter()
                .zip(&b.0)
                .all(|(x, y)| (x - y).abs() <= 1e-12 * (1.0 + y.abs()));
        let l =
            a.1.iter()
                .zip(&b.1)
                .all(|(x, y)| (x == y) || (x - y).abs() <= 1e-12 * (1.0 + y.abs()));
        o && l && a.0.len() == b.0.len() && a.1.len() == b.1.len()
    }

    proptest! {
        #![proptest_config(crate::proptest_ci::config(256))]

        /// For every split point of the keys, merging the halves' states gives the state
        /// of all keys (within 1e-12 relative, f64).
        #[test]
        fn merging_the_halves_of_any_split_equals_the_unsplit_attention(
            (rows, dim, scores, values) in problem(), cut in 0usize..=24
        ) {
            let keys = values.len() / dim;
            let cut = cut.min(keys);
            let whole = state(rows, dim, &scores, &values, 0..keys);
            let left = state(rows, dim, &scores, &values, 0..cut);
            let right = state(rows, dim, &scores, &values, cut..keys);
            let merged = merge_states((&left.0, &left.1), (&right.0, &right.1)).unwrap();
            prop_assert!(close(&merged, &whole), "cut {cut} of {keys}: {merged:?} vs {whole:?}");
            let swapped = merge_states((&right.0, &right.1), (&left.0, &left.1)).unwrap();
            prop_assert!(close(&swapped, &whole));
        }

        /// An empty half (o = 0, lse = −∞) is the identity, exactly, on either side.
        #[test]
        fn an_empty_half_is_the_identity_exactly((rows, dim, scores, values) in problem()) {
            let keys = values.len() / dim;
            let s = state(rows, dim, &scores, &values, 0..keys);
            let e = empty_state(rows, dim);
            prop_assert_eq!(&merge_states((&s.0, &s.1), (&e.0, &e.1)).unwrap(), &s);
            prop_assert_eq!(&merge_states((&e.0, &e.1), (&s.0, &s.1)).unwrap(), &s);
        }
    }

    #[test]
    fn two_empty_states_merge_to_zero_and_minus_infinity() {
        let e = empty_state(2, 3);
        let m = merge_states((&e.0, &e.1), (&e.0, &e.1)).unwrap();
        assert_eq!(m, e);
    }

    #[test]
    fn mismatched_shapes_and_bad_lse_are_errors() {
        let err = merge_states((&[1.0, 2.0], &[0.0]), (&[1.0], &[0.0])).unwrap_err();
        assert!(
            matches!(err, MergeError::Shape { operand: "b", .. }),
            "{err}"
        );
        let err = merge_states((&[1.0], &[f64::NAN]), (&[1.0], &[0.0])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "state a: lse of row 0 is NaN; it must be finite or -inf"
        );
        assert!(merge_states((&[1.0], &[0.0]), (&[1.0], &[f64::INFINITY])).is_err());
    }
}
