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

/// The element strides `[batch, head, row]` of a `[B, H, S, D]` output (`extents`) written
/// into contiguous `[B, S, H, D]` memory (FlashAttention's layout, a `layout="bshd"` caller's).
pub fn bshd_strides(extents: [usize; 4]) -> [usize; 3] {
    [
        extents[2] * extents[1] * extents[3],
        extents[3],
        extents[1] * extents[3],
    ]
}

/// An output of `extents` read back from memory it was written into through `strides`,
/// gathered into contiguous `[B, H, S, D]` order; `None` where a row falls outside `data`.
pub fn gather_contiguous<T: Copy>(
    data: &[T],
    extents: [usize; 4],
    strides: [usize; 3],
) -> Option<Vec<T>> {
    let [b_n, h_n, s_n, d_n] = extents;
    let n = extents.iter().try_fold(1usize, |a, &e| a.checked_mul(e))?;
    let mut dense = Vec::with_capacity(n.min(data.len()));
    for b in 0..b_n {
        for h in 0..h_n {
            for row in 0..s_n {
                let at = b
                    .checked_mul(strides[0])?
                    .checked_add(h.checked_mul(strides[1])?)?
                    .checked_add(row.checked_mul(strides[2])?)?;
                dense.extend_from_slice(data.get(at..at.checked_add(d_n)?)?);
            }
        }
    }
    Some(dense)
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

/// One past the last element's offset of an output of `extents` (`[B, H, S, D]`) under
/// `strides`: the elements a buffer must hold for it (`None` past `usize`).
pub fn output_span(extents: [usize; 4], strides: [usize; 3]) -> Option<usize> {
    strides
        .iter()
        .zip(&extents[..3])
        .try_fold(extents[3], |span, (&s, &e)| {
            s.checked_mul(e.checked_sub(1)?)?.checked_add(span)
        })
}

/// [`check_output_strides`], and the output inside a buffer of `len` elements: the check
/// of the safe calls that write into buffers they were given (`AttentionRunner::prepare`,
/// `prepare_backward`), where strides that pass the buffer would write past it.
pub fn check_output_buffer(
    what: &str,
    extents: [usize; 4],
    strides: [usize; 3],
    len: usize,
) -> Result<(), AttentionError> {
    check_output_strides(what, extents, strides)?;
    match output_span(extents, strides) {
        Some(span) if span <= len => Ok(()),
        span => Err(AttentionError::Shape(format!(
            "{what} strides {strides:?} (elements; batch, head, row) for [B, H, S, D] = \
             {extents:?} span {} elements; the buffer holds {len}",
            span.map_or_else(|| "more than usize::MAX".to_string(), |s| s.to_string())
        ))),
    }
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
        fn an_outputs_span_is_one_past_its_last_address_and_bounds_every_buffer_it_fits(
            b in 1usize..4, h in 1usize..4, s in 1usize..5, d in prop::sample::select(vec![8usize, 16]),
            strides in prop::array::uniform3(0usize..48),
            slack in 0usize..3,
        ) {
            let extents = [b, h, s, d];
            let strides = strides.map(|x| 8 * x);
            let a = addresses(extents, strides);
            let last = *a.last().expect("every extent is at least 1");
            prop_assert_eq!(output_span(extents, strides), Some(last + 1));
            let ok = check_output_strides("o", extents, strides).is_ok();
            // A buffer one element short is refused; one that holds the span is taken
            // exactly when the strides are.
            prop_assert!(check_output_buffer("o", extents, strides, last).is_err());
            prop_assert_eq!(check_output_buffer("o", extents, strides, last + 1 + slack).is_ok(), ok);
        }

        #[test]
        fn a_bshd_output_gathers_back_to_the_contiguous_one(
            b in 1usize..4, h in 1usize..5, s in 1usize..9, d in prop::sample::select(vec![8usize, 16]),
        ) {
            let extents = [b, h, s, d];
            let st = bshd_strides(extents);
            prop_assert!(check_output_strides("o", extents, st).is_ok());
            prop_assert_eq!(output_span(extents, st), Some(b * h * s * d));
            // Element (b, h, s, d) of the bshd memory holds its own contiguous index.
            let n = b * h * s * d;
            let mut memory = vec![usize::MAX; n];
            for (i, addr) in (0..b).flat_map(|bi| (0..h).flat_map(move |hi| (0..s).flat_map(move |si| {
                (0..d).map(move |di| bi * st[0] + hi * st[1] + si * st[2] + di)
            }))).enumerate() {
                memory[addr] = i;
            }
            prop_assert_eq!(gather_contiguous(&memory, extents, st), Some((0..n).collect::<Vec<_>>()));
            prop_assert_eq!(gather_contiguous(&memory[..n - 1], extents, st), None);
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
