//! Output strides: where the kernels write an output that is not contiguous
//! `[B, H, S, D]` (a `[B, S, H, D]` caller's, FlashAttention's layout), and the check that
//! every element of the shape gets an address of its own.

use super::AttentionError;

/// The element strides `[batch, head, row]` of a contiguous tensor of `extents`
/// (`[B, H, S, D]`).
pub fn contiguous_strides(extents: [usize; 4]) -> [usize; 3] {
    [
        extents[1] * extents[2] * extents[3],
        extents[2] * extents[3],
        extents[3],
    ]
}

/// Refuses output strides the kernels cannot write through (the forward's O, the backward's
/// gradients): zero or not a multiple of 8
/// elements (16 bytes: the staged epilogue's vector stores) on a dim of more than one index,
/// past `i64`, or two elements of `[B, H, S, D]` (`extents`) at one address (the CTAs
/// would race). The check sorts the
/// dims by stride and asks each stride to clear the span of the dims below it, which every
/// dense permutation (`[B, S, H, D]` among them) meets.
pub fn check_output_strides(
    what: &str,
    extents: [usize; 4],
    strides: [usize; 3],
) -> Result<(), AttentionError> {
    let bad = |why: String| {
        Err(AttentionError::Shape(format!(
            "{what} strides {strides:?} (elements; batch, head, row) for [B, H, S, D] = \
             {extents:?}: {why}"
        )))
    };
    // A dim of extent 1 only ever takes index 0: its stride is not used.
    let used = strides.iter().zip(&extents[..3]).filter(|&(_, &e)| e > 1);
    if let Some((s, _)) = used.clone().find(|&(&s, _)| s == 0 || s % 8 != 0) {
        return bad(format!(
            "{s} is not a positive multiple of 8 elements (16 bytes)"
        ));
    }
    if strides.iter().any(|&s| s > i64::MAX as usize) {
        return bad("a stride passes i64".into());
    }
    let mut dims: Vec<(usize, usize)> = strides
        .iter()
        .zip(&extents[..3])
        .map(|(&s, &e)| (s, e))
        .filter(|&(_, e)| e > 1)
        .collect();
    dims.sort_unstable();
    let mut span = extents[3];
    for (s, e) in dims {
        if s < span {
            return bad(format!(
                "the dims overlap (stride {s} below the span {span} of the dims under it)"
            ));
        }
        span = match s.checked_mul(e - 1).and_then(|x| x.checked_add(span)) {
            Some(x) if x <= i64::MAX as usize => x,
            _ => return bad("the span passes i64".into()),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every element's address under `strides` (the head dim contiguous), sorted.
    fn addresses(extents: [usize; 4], strides: [usize; 3]) -> Vec<usize> {
        let mut out = Vec::new();
        for b in 0..extents[0] {
            for h in 0..extents[1] {
                for s in 0..extents[2] {
                    for d in 0..extents[3] {
                        out.push(b * strides[0] + h * strides[1] + s * strides[2] + d);
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    proptest! {
        #![proptest_config(super::super::proptest_ci::config(256))]

        #[test]
        fn accepted_output_strides_give_every_element_its_own_address(
            b in 1usize..4, h in 1usize..4, s in 1usize..5, d in prop::sample::select(vec![8usize, 16]),
            strides in prop::array::uniform3(0usize..48),
        ) {
            let extents = [b, h, s, d];
            let strides = strides.map(|x| 8 * x);
            if check_output_strides("dq", extents, strides).is_ok() {
                let mut a = addresses(extents, strides);
                let n = a.len();
                a.dedup();
                prop_assert_eq!(a.len(), n, "{:?} {:?}", extents, strides);
            }
        }

        #[test]
        fn every_dense_order_of_batch_heads_rows_is_accepted_and_odd_strides_are_not(
            b in 1usize..5, h in 1usize..5, s in 1usize..70, d in prop::sample::select(vec![64usize, 128, 256]),
            order in Just([0usize, 1, 2]).prop_shuffle(),
            odd in 1usize..8,
        ) {
            // Dims in `order`, outermost first, then D: the layout a permute of a
            // contiguous tensor gives ([B, S, H, D] among them).
            let extents = [b, h, s, d];
            let mut strides = [0usize; 3];
            let mut span = d;
            for &dim in order.iter().rev() {
                strides[dim] = span;
                span *= extents[dim];
            }
            prop_assert!(check_output_strides("dq", extents, strides).is_ok(), "{:?} {:?}", extents, strides);
            let mut bad = strides;
            bad[order[2]] += odd;
            prop_assert_eq!(check_output_strides("dq", extents, bad).is_err(), extents[order[2]] > 1);
            let mut zero = strides;
            zero[order[0]] = 0;
            prop_assert_eq!(check_output_strides("dq", extents, zero).is_err(), extents[order[0]] > 1);
        }
    }
}
