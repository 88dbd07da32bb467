//! Lightning decode inputs from arrays (`.npy` or safetensors, read by `masks::io`):
//! every shape, dtype and slope checked, with errors that name the input, before any
//! GPU work. Shared by the CLI and, later, other front ends.

use fragmask_kernels::family::dtype::ActDtype;
use fragmask_kernels::lightning::LightningProblem;
use fragmask_masks::io::{ArrayView, DType};

use super::attention::InputError;

/// Validated inputs: the problem, the activations as raw little-endian bytes of
/// `problem.dtype`, the state and the slopes.
#[derive(Clone, Debug)]
pub struct LightningInputs {
    /// The sizes.
    pub problem: LightningProblem,
    /// q `[B, H, n, D]`.
    pub q: Vec<u8>,
    /// k `[B, H, n, D]`.
    pub k: Vec<u8>,
    /// v `[B, H, n, E]`.
    pub v: Vec<u8>,
    /// The state `[B, H, D, E]`.
    pub state: Vec<f32>,
    /// Slopes `[H]`.
    pub slopes: Vec<f32>,
}

fn invalid(what: &str, message: impl Into<String>) -> InputError {
    InputError::Invalid {
        what: what.to_string(),
        message: message.into(),
    }
}

fn act_dtype(view: &ArrayView<'_>, what: &str) -> Result<ActDtype, InputError> {
    match view.dtype {
        DType::BF16 => Ok(ActDtype::Bf16),
        DType::F16 => Ok(ActDtype::F16),
        DType::F32 => Ok(ActDtype::F32),
        other => Err(invalid(
            what,
            format!(
                "dtype {} is not an activation type: expected bfloat16, float16 or float32",
                other.name()
            ),
        )),
    }
}

fn f32s(view: &ArrayView<'_>, what: &str) -> Result<Vec<f32>, InputError> {
    if view.dtype != DType::F32 {
        return Err(invalid(
            what,
            format!("dtype {} must be float32", view.dtype.name()),
        ));
    }
    Ok(view
        .data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Checks `[q, k, v, state, slope]` (each named by `names` in errors) and returns the
/// inputs of one call. q, k, v share a dtype (bf16, f16 or f32); the state is float32
/// `[B, H, D, E]`; the slope is float32 `[H]` or `[H, 1, 1]` (the write-up's shape), finite.
pub fn lightning_inputs(
    views: [&ArrayView<'_>; 5],
    names: [&str; 5],
) -> Result<LightningInputs, InputError> {
    let [q, k, v, state, slope] = views;
    let [qn, kn, vn, sn, ln] = names;
    let dims = |view: &ArrayView<'_>, what: &str| -> Result<[usize; 4], InputError> {
        <[usize; 4]>::try_from(view.shape.as_slice())
            .map_err(|_| invalid(what, format!("has shape {:?}; expected rank 4", view.shape)))
    };
    let [b, h, n, d] = dims(q, qn)?;
    let e = dims(v, vn)?[3];
    let dtype = act_dtype(q, qn)?;
    for (view, what) in [(k, kn), (v, vn)] {
        let other = act_dtype(view, what)?;
        if other != dtype {
            return Err(invalid(
                what,
                format!("dtype {} differs from q's {}", other.name(), dtype.name()),
            ));
        }
    }
    let problem = LightningProblem {
        batch: b,
        heads: h,
        tokens: n,
        dim_k: d,
        dim_v: e,
        dtype,
    }
    .validate()
    .map_err(|err| invalid(qn, err.to_string()))?;
    for (view, tensor, what) in [(k, "k", kn), (v, "v", vn), (state, "state", sn)] {
        problem
            .check_shape(tensor, &view.shape)
            .map_err(|err| invalid(what, err.to_string()))?;
    }
    let slope_len = match slope.shape.as_slice() {
        [h] | [h, 1, 1] => *h,
        other => {
            return Err(invalid(
                ln,
                format!("has shape {other:?}; expected [H] or [H, 1, 1]"),
            ))
        }
    };
    let slopes = f32s(slope, ln)?;
    debug_assert_eq!(slopes.len(), slope_len);
    problem
        .check_slopes(&slopes)
        .map_err(|err| invalid(ln, err.to_string()))?;
    let state = f32s(state, sn)?;
    Ok(LightningInputs {
        problem,
        q: q.data.to_vec(),
        k: k.data.to_vec(),
        v: v.data.to_vec(),
        state,
        slopes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(dtype: DType, shape: &[usize], data: &[u8]) -> ArrayView<'static> {
        ArrayView {
            dtype,
            shape: shape.to_vec(),
            data: Box::leak(data.to_vec().into_boxed_slice()),
        }
    }

    fn zeros(dtype: DType, shape: &[usize]) -> ArrayView<'static> {
        let n: usize = shape.iter().product();
        view(dtype, shape, &vec![0u8; n * dtype.size()])
    }

    const NAMES: [&str; 5] = ["--q a", "--k b", "--v c", "--state d", "--slope e"];

    fn slopes(values: &[f32]) -> ArrayView<'static> {
        let bytes: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
        view(DType::F32, &[values.len(), 1, 1], &bytes)
    }

    #[test]
    fn consistent_inputs_make_a_problem() {
        let q = zeros(DType::BF16, &[2, 3, 1, 96]);
        let state = zeros(DType::F32, &[2, 3, 96, 64]);
        let v = zeros(DType::BF16, &[2, 3, 1, 64]);
        let s = slopes(&[0.1, 0.2, 0.3]);
        let got = lightning_inputs([&q, &q, &v, &state, &s], NAMES).unwrap();
        assert_eq!(
            (got.problem.batch, got.problem.dim_k, got.problem.dim_v),
            (2, 96, 64)
        );
        assert_eq!(got.slopes, vec![0.1, 0.2, 0.3]);
    }

    #[test]
    fn each_bad_input_is_named() {
        let q = zeros(DType::BF16, &[1, 2, 1, 96]);
        let state = zeros(DType::F32, &[1, 2, 96, 96]);
        let s = slopes(&[0.1, 0.2]);
        let message = |r: Result<LightningInputs, InputError>| r.unwrap_err().to_string();
        let wrong_state = zeros(DType::F32, &[1, 2, 96, 95]);
        assert!(
            message(lightning_inputs([&q, &q, &q, &wrong_state, &s], NAMES)).contains("--state d")
        );
        let f16_state = zeros(DType::F16, &[1, 2, 96, 96]);
        assert!(message(lightning_inputs([&q, &q, &q, &f16_state, &s], NAMES)).contains("float32"));
        let short = slopes(&[0.1]);
        assert!(
            message(lightning_inputs([&q, &q, &q, &state, &short], NAMES)).contains("--slope e")
        );
        let nan = slopes(&[0.1, f32::NAN]);
        let m = message(lightning_inputs([&q, &q, &q, &state, &nan], NAMES));
        assert!(m.contains("--slope e") && m.contains("finite"), "{m}");
        let f32_k = zeros(DType::F32, &[1, 2, 1, 96]);
        assert!(message(lightning_inputs([&q, &f32_k, &q, &state, &s], NAMES)).contains("--k b"));
        let i32_q = zeros(DType::I32, &[1, 2, 1, 96]);
        assert!(message(lightning_inputs([&i32_q, &q, &q, &state, &s], NAMES)).contains("--q a"));
        let rank3 = zeros(DType::BF16, &[2, 1, 96]);
        assert!(message(lightning_inputs([&rank3, &q, &q, &state, &s], NAMES)).contains("rank 4"));
        let odd = zeros(DType::BF16, &[1, 2, 1, 95]);
        assert!(
            message(lightning_inputs([&odd, &odd, &q, &state, &s], NAMES)).contains("unsupported")
        );
    }
}
