//! Measuring lightning decode: median of CUDA-event timings after a warm-up, rotating
//! among enough independent state sets that the state does not sit in L2, beside a
//! device-to-device copy measured the same way (the roof: one read and one write).

use fragmask_host::cudarc::driver::CudaSlice;
use fragmask_kernels::lightning::{LightningConfig, LightningProblem};

use fragmask_host::lightning::{LightningDecode, LightningTensors};
use fragmask_host::{Error, Result};

use super::check::{minimax_slopes, random_activations};
use crate::timing::{time_on_stream, TimingConfig};

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// The problem.
    pub problem: LightningProblem,
    /// The geometry that ran.
    pub config: LightningConfig,
    /// State sets rotated through (each launch uses the next).
    pub sets: usize,
    /// Median time of one call, ms.
    pub ms: f64,
    /// Bytes of one read and one write of the state.
    pub state_bytes: usize,
    /// `state_bytes / ms`, GB/s.
    pub gbps: f64,
    /// Median time of one call when the rotated launches replay as one CUDA graph, ms.
    pub graph_ms: f64,
}

/// A device-to-device copy of `bytes`: `(median ms, GB/s counting read + write)`.
pub fn copy_roof(
    decode: &LightningDecode,
    bytes: usize,
    timing: TimingConfig,
) -> Result<(f64, f64)> {
    let s = decode.stream();
    let alloc = |n| {
        s.alloc_zeros::<u8>(n)
            .map_err(Error::driver("allocating the copy buffers"))
    };
    let src: CudaSlice<u8> = alloc(bytes)?;
    let mut dst: CudaSlice<u8> = alloc(bytes)?;
    let t = time_on_stream(s, timing, |s| {
        s.memcpy_dtod(&src, &mut dst)
            .map_err(Error::driver("copying"))
    })?;
    Ok((t.median_ms, 2.0 * bytes as f64 / (t.median_ms * 1e6)))
}

/// Times `problem` (in place) with `geometry` or the chosen one, rotating among sets
/// whose states add up to at least `rotate_bytes` (at most 256 sets).
pub fn bench(
    decode: &LightningDecode,
    problem: &LightningProblem,
    geometry: Option<LightningConfig>,
    timing: TimingConfig,
    rotate_bytes: usize,
) -> Result<BenchRow> {
    let problem = problem
        .validate()
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let config = geometry.unwrap_or_else(|| decode.choose(&problem));
    let state_bytes = problem
        .state_bytes_moved()
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let sets = rotate_bytes.div_ceil(state_bytes / 2).clamp(1, 256);
    let s = decode.stream().clone();
    let mut seed = 0x5eed_u64;
    let mut all = Vec::with_capacity(sets);
    let n = |t| problem.elements(t).unwrap_or(0);
    let (state_bytes_host, _) = random_activations(
        fragmask_kernels::family::dtype::ActDtype::F32,
        n("state"),
        &mut seed,
    );
    let state0: Vec<f32> = state_bytes_host
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (q, _) = random_activations(problem.dtype, n("q"), &mut seed);
    let (k, _) = random_activations(problem.dtype, n("k"), &mut seed);
    let (v, _) = random_activations(problem.dtype, n("v"), &mut seed);
    let slopes = minimax_slopes(problem.heads);
    let upload = |e| Error::driver("uploading benchmark inputs")(e);
    for _ in 0..sets {
        let mut t = LightningTensors::zeros(&s, &problem)?;
        s.memcpy_htod(&state0, &mut t.state).map_err(upload)?;
        s.memcpy_htod(&q, &mut t.q).map_err(upload)?;
        s.memcpy_htod(&k, &mut t.k).map_err(upload)?;
        s.memcpy_htod(&v, &mut t.v).map_err(upload)?;
        s.memcpy_htod(&slopes, &mut t.slope).map_err(upload)?;
        all.push(t);
    }
    let t = time_on_stream(&s, timing, |_| {
        for tensors in all.iter_mut() {
            decode.launch(&problem, tensors, Some(config))?;
        }
        Ok(())
    })?;
    let ms = t.median_ms / sets as f64;
    // The same launches captured once into a CUDA graph on a capturable stream (raw
    // pointers, so nothing but the kernel launches is captured).
    let graph_stream = s
        .context()
        .new_stream()
        .map_err(Error::driver("creating the capture stream"))?;
    s.synchronize()
        .map_err(Error::driver("synchronising before capture"))?;
    let captured = decode.with_stream(graph_stream.clone());
    let pointers = all
        .iter()
        .map(|t| t.pointers(&problem, &graph_stream))
        .collect::<Result<Vec<_>>>()?;
    graph_stream
        .synchronize()
        .map_err(Error::driver("synchronising before capture"))?;
    graph_stream
        .begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(Error::driver("beginning a graph capture"))?;
    for p in &pointers {
        // SAFETY: each pointer set comes from `pointers()` of a live tensor set of
        // `problem`, which outlives every replay below.
        let launched = unsafe { captured.launch_raw(&problem, *p, Some(config)) };
        if let Err(e) = launched {
            let _ = graph_stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
            return Err(e);
        }
    }
    let graph = graph_stream
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .map_err(Error::driver("ending the graph capture"))?
        .ok_or_else(|| Error::InvalidArgument("the graph capture recorded nothing".into()))?;
    let g = time_on_stream(&graph_stream, timing, |_| {
        graph.launch().map_err(Error::driver("replaying the graph"))
    })?;
    Ok(BenchRow {
        graph_ms: g.median_ms / sets as f64,
        problem,
        config,
        sets,
        ms,
        state_bytes,
        gbps: state_bytes as f64 / (ms * 1e6),
    })
}
