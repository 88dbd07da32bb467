//! Timing of the split-KV forward with its K and V rotated out of L2, as the decode
//! benchmark times decode (`decode::bench`): the same workload, the same method, side by
//! side (docs/architecture.md, "Split-KV forward").

use fragmask_masks::PackedMask;

use crate::timing::{time_on_stream, TimingConfig};
use fragmask_host::attention::{
    driver, AttentionError, AttentionOptions, AttentionRunner, AttentionShape, DeviceTensor, Mask,
};

/// Most input sets one timing rotates through.
pub const MAX_SETS: usize = 64;

/// One timed configuration of [`time_forward_rotated`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForwardTiming {
    /// Median time of one call, ms.
    pub ms: f64,
    /// The split count the call ran with (the planner's where the options left it open).
    pub splits: u32,
}

/// Median time of one forward call of `shape` under `mask` for each of `opts`, rotating
/// among input sets whose K and V add up to at least `rotate_bytes` (at most
/// [`MAX_SETS`]; the inputs and the mask are uploaded once for every option); with the
/// number of sets.
pub fn time_forward_rotated(
    runner: &AttentionRunner,
    shape: &AttentionShape,
    mask: &PackedMask,
    opts: &[AttentionOptions],
    timing: TimingConfig,
    rotate_bytes: usize,
) -> Result<(Vec<ForwardTiming>, usize), AttentionError> {
    shape.validate()?;
    let elems = |s: [usize; 4]| {
        s.iter()
            .try_fold(1usize, |a, &x| a.checked_mul(x))
            .ok_or_else(|| AttentionError::Shape(format!("{s:?} overflows")))
    };
    let (q_len, kv_len) = (elems(shape.q_shape())?, elems(shape.kv_shape())?);
    let kv_bytes = kv_len
        .checked_mul(4)
        .ok_or_else(|| AttentionError::Shape("K and V bytes overflow".into()))?;
    let sets = rotate_bytes.div_ceil(kv_bytes.max(1)).clamp(1, MAX_SETS);
    let device_mask = runner.upload_block_mask(mask)?;
    let s = runner.stream();
    // Non-zero bf16 values (1.0 and -0.5 alternating): timing needs data, not fresh data.
    let fill = |n: usize| -> Result<DeviceTensor<u16>, AttentionError> {
        let host: Vec<u16> = (0..n)
            .map(|i| if i % 2 == 0 { 0x3F80 } else { 0xBF00 })
            .collect();
        Ok(DeviceTensor {
            data: s.clone_htod(&host).map_err(driver("uploading inputs"))?,
            shape: [0; 4],
        })
    };
    let mut inputs = Vec::with_capacity(sets);
    for _ in 0..sets {
        let mut q = fill(q_len)?;
        q.shape = shape.q_shape();
        let mut k = fill(kv_len)?;
        k.shape = shape.kv_shape();
        let mut v = fill(kv_len)?;
        v.shape = shape.kv_shape();
        inputs.push((q, k, v, runner.alloc_output(shape)?));
    }
    let m = Mask::Blocks(&device_mask);
    let mut timings = Vec::with_capacity(opts.len());
    for o in opts {
        let mut launches = Vec::with_capacity(sets);
        for (q, k, v, out) in inputs.iter_mut() {
            launches.push(runner.prepare(q, k, v, &m, o, out)?);
        }
        let t = time_on_stream(s, timing, |_| {
            for l in &launches {
                l.launch()
                    .map_err(|e| fragmask_host::Error::InvalidArgument(e.to_string()))?;
            }
            Ok(())
        })
        .map_err(AttentionError::Host)?;
        timings.push(ForwardTiming {
            ms: t.median_ms / sets as f64,
            splits: launches.first().map_or(1, |l| l.splits),
        });
    }
    Ok((timings, sets))
}
