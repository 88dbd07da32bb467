//! The lightning decode kernel against the f64 [`reference`](super::reference), over many
//! consecutive decode steps on one state, so that drift would show.

use fragmask_kernels::family::dtype::ActDtype;
use fragmask_kernels::lightning::{LightningConfig, LightningProblem};

use fragmask_host::lightning::{LightningDecode, LightningTensors};
use fragmask_host::{Error, Result};

use super::reference::{lightning_reference, relative_error};
use crate::random::splitmix64;

/// The outcome of [`check`].
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// The problem of every step.
    pub problem: LightningProblem,
    /// The geometry that ran.
    pub config: LightningConfig,
    /// Steps run.
    pub steps: usize,
    /// `‖state − ref‖ / ‖ref‖` after the last step.
    pub state_error: f64,
    /// The largest `‖o − ref‖ / ‖ref‖` over the steps.
    pub o_error: f64,
    /// The bound `o_error` must meet (the rounding of o to the dtype).
    pub o_tolerance: f64,
    /// The bound `state_error` must meet ([`state_tolerance`]).
    pub state_tolerance: f64,
}

impl CheckReport {
    /// Whether both errors are within their bounds.
    pub fn passed(&self) -> bool {
        self.state_error <= self.state_tolerance && self.o_error <= self.o_tolerance
    }
}

/// MiniMax-01's decay slopes, `2^(−8(h+1)/H)` (the ALiBi-style schedule of the
/// lightning attention paper): all positive, so the state stays bounded.
pub fn minimax_slopes(heads: usize) -> Vec<f32> {
    (0..heads)
        .map(|h| (2f64).powf(-8.0 * (h as f64 + 1.0) / heads as f64) as f32)
        .collect()
}

/// `count` uniform values in `[-1, 1)`, rounded to `dtype`: `(bytes, values as f64)`.
pub fn random_activations(dtype: ActDtype, count: usize, seed: &mut u64) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::with_capacity(count * dtype.size());
    let mut values = Vec::with_capacity(count);
    for _ in 0..count {
        let x = (splitmix64(seed) >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
        match dtype {
            ActDtype::Bf16 => {
                let h = half::bf16::from_f32(x);
                bytes.extend_from_slice(&h.to_bits().to_le_bytes());
                values.push(f64::from(h.to_f32()));
            }
            ActDtype::F16 => {
                let h = half::f16::from_f32(x);
                bytes.extend_from_slice(&h.to_bits().to_le_bytes());
                values.push(f64::from(h.to_f32()));
            }
            ActDtype::F32 => {
                bytes.extend_from_slice(&x.to_le_bytes());
                values.push(f64::from(x));
            }
        }
    }
    (bytes, values)
}

/// Decodes raw `dtype` bytes to f64.
pub fn decode_activations(dtype: ActDtype, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        ActDtype::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(half::bf16::from_le_bytes([c[0], c[1]]).to_f32()))
            .collect(),
        ActDtype::F16 => bytes
            .chunks_exact(2)
            .map(|c| f64::from(half::f16::from_le_bytes([c[0], c[1]]).to_f32()))
            .collect(),
        ActDtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    }
}

/// The tolerance of `o` in `dtype`: a few units of its rounding.
pub fn o_tolerance(dtype: ActDtype) -> f64 {
    match dtype {
        ActDtype::Bf16 => 8e-3,
        ActDtype::F16 => 1e-3,
        ActDtype::F32 => 2e-5,
    }
}

/// The bound on the state's relative error: fp32 rounding (`u = 2^-24`) of the decay
/// `exp(−slope)` and of each update, amplified by the decay's memory: an error in
/// the ratio reaches the terms `k` steps back `k` times, and the weights `ratio^k` sum
/// to at most `1 / (1 − ratio)` steps. Bound: `4u · (1 + max_h 1/(1 − exp(−slope_h)))`
/// (6.1e-5 for MiniMax-01's slopes at H = 64, whose smallest is 2^-8).
pub fn state_tolerance(slopes: &[f32]) -> f64 {
    let u = f64::powi(2.0, -24);
    let window = slopes
        .iter()
        .map(|&s| 1.0 / (1.0 - (-f64::from(s)).exp()))
        .fold(1.0, f64::max);
    4.0 * u * (1.0 + window)
}

/// Host bytes of [`check`] on `problem`: the state as f32 bytes, f32 and f64 (the
/// reference's, and the GPU's read back), and each step's q, k, v and o in the element
/// type and as f64.
pub fn check_host_bytes(problem: &LightningProblem) -> Option<usize> {
    let size = problem.dtype.size();
    let n = |t| problem.elements(t).ok();
    crate::limits::sum_of_products(&[
        (n("state")?, 28),
        (n("q")?, 2 * (size + 8)),
        (n("v")?, 2 * (size + 8)),
        (n("o")?, 2 * (size + 8)),
    ])
}

/// Refuses a check whose host copies exceed [`crate::limits::MAX_HOST_BYTES`]
/// ([`check_host_bytes`]), before anything is allocated.
pub fn check_host_budget(problem: &LightningProblem) -> Result<()> {
    let max = crate::limits::MAX_HOST_BYTES;
    match check_host_bytes(problem) {
        Some(need) if need <= max => Ok(()),
        need => Err(Error::InvalidArgument(format!(
            "the state, inputs and f64 reference of the check would take {} bytes of host \
             memory; at most {max} (4 GiB)",
            need.map_or("more than 2^64".to_string(), |n| n.to_string())
        ))),
    }
}

/// Runs `steps` consecutive calls of `problem` on one state (fresh random q, k, v each
/// step, o poisoned with NaN before each launch) and compares every o and the final
/// state with the f64 reference run alongside.
pub fn check(
    decode: &LightningDecode,
    problem: &LightningProblem,
    steps: usize,
    seed: u64,
    geometry: Option<LightningConfig>,
) -> Result<CheckReport> {
    let problem = problem
        .validate()
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    check_host_budget(&problem)?;
    let config = geometry.unwrap_or_else(|| decode.choose(&problem));
    let stream = decode.stream().clone();
    let mut tensors = LightningTensors::zeros(&stream, &problem)?;
    let mut seed = seed;
    let slopes = minimax_slopes(problem.heads);
    let slopes64: Vec<f64> = slopes.iter().map(|&s| f64::from(s)).collect();
    let state_len = problem
        .elements("state")
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let (state_bytes, mut state_ref) = random_activations(ActDtype::F32, state_len, &mut seed);
    let state0: Vec<f32> = state_bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let upload = |e| Error::driver("uploading lightning inputs")(e);
    stream
        .memcpy_htod(&state0, &mut tensors.state)
        .map_err(upload)?;
    stream
        .memcpy_htod(&slopes, &mut tensors.slope)
        .map_err(upload)?;
    let n = |t| problem.elements(t).unwrap_or(0);
    let poison = vec![0xffu8; tensors.o.len()];
    let mut o_error = 0.0f64;
    for _ in 0..steps {
        let (qb, q) = random_activations(problem.dtype, n("q"), &mut seed);
        let (kb, k) = random_activations(problem.dtype, n("k"), &mut seed);
        let (vb, v) = random_activations(problem.dtype, n("v"), &mut seed);
        stream.memcpy_htod(&qb, &mut tensors.q).map_err(upload)?;
        stream.memcpy_htod(&kb, &mut tensors.k).map_err(upload)?;
        stream.memcpy_htod(&vb, &mut tensors.v).map_err(upload)?;
        stream
            .memcpy_htod(&poison, &mut tensors.o)
            .map_err(upload)?;
        decode.launch(&problem, &mut tensors, Some(config))?;
        let o_ref = lightning_reference(&problem, &q, &k, &v, &mut state_ref, &slopes64);
        let o_bytes = stream
            .clone_dtoh(&tensors.o)
            .map_err(Error::driver("reading o back"))?;
        o_error = o_error.max(relative_error(
            &decode_activations(problem.dtype, &o_bytes),
            &o_ref,
        ));
    }
    let state = stream
        .clone_dtoh(&tensors.state)
        .map_err(Error::driver("reading the state back"))?;
    let state: Vec<f64> = state.iter().map(|&x| f64::from(x)).collect();
    Ok(CheckReport {
        problem,
        config,
        steps,
        state_error: relative_error(&state, &state_ref),
        o_error,
        o_tolerance: o_tolerance(problem.dtype),
        state_tolerance: state_tolerance(&slopes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimax_slopes_are_positive_and_decreasing() {
        let s = minimax_slopes(64);
        assert_eq!(s.len(), 64);
        assert!((s[63] - 2f32.powi(-8)).abs() < 1e-9);
        assert!(s.windows(2).all(|w| w[0] > w[1] && w[1] > 0.0));
    }

    #[test]
    fn state_tolerance_grows_with_the_decay_window() {
        let tight = state_tolerance(&[2.0]);
        let minimax = state_tolerance(&minimax_slopes(64));
        assert!(tight < 1e-6, "{tight}");
        assert!((5e-5..7e-5).contains(&minimax), "{minimax}");
    }

    #[test]
    fn random_activations_round_trip_through_their_dtype() {
        for dtype in [ActDtype::Bf16, ActDtype::F16, ActDtype::F32] {
            let mut seed = 7;
            let (bytes, values) = random_activations(dtype, 1000, &mut seed);
            assert_eq!(decode_activations(dtype, &bytes), values);
            assert!(values.iter().all(|v| (-1.0..=1.0).contains(v)));
            assert!(values.iter().any(|&v| v != values[0]));
        }
    }
}
