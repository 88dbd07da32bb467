//! CUDA-event timing: warm-up runs, then robust statistics over timed runs.
//!
//! Each timed run records a start event on the stream, calls the closure
//! (which enqueues work on that stream), records an end event and reads the
//! elapsed GPU time. The closure must only *enqueue* work; host-side
//! synchronisation inside it would still be timed correctly by the events,
//! but would serialise the runs.
//!
//! Statistics are computed by [`Timing::from_samples`], a pure function.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fragmask_host::cudarc::driver::{sys, CudaStream};

use fragmask_host::{Error, Result};

/// How many runs to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimingConfig {
    /// Untimed runs first (JIT, caches, clocks).
    pub warmup: usize,
    /// Then more untimed runs until this many milliseconds have passed since the first
    /// of them (0: none), so that the timed runs see the clocks a sustained load settles
    /// at under the power cap, not the boost of a GPU that was idle a moment before.
    pub warmup_ms: u32,
    /// Timed runs (at least 1).
    pub runs: usize,
}

impl Default for TimingConfig {
    fn default() -> Self {
        Self {
            warmup: 3,
            warmup_ms: 0,
            runs: 20,
        }
    }
}

/// Statistics of a set of run times, in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Median.
    pub median_ms: f64,
    /// Fastest run.
    pub min_ms: f64,
    /// Slowest run.
    pub max_ms: f64,
    /// 10th percentile (nearest rank).
    pub p10_ms: f64,
    /// 90th percentile (nearest rank).
    pub p90_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
    /// The samples, in run order.
    pub samples_ms: Vec<f64>,
}

impl Timing {
    /// Computes the statistics. Errors on an empty or non-finite sample set.
    pub fn from_samples(samples_ms: Vec<f64>) -> Result<Self> {
        if samples_ms.is_empty() {
            return Err(Error::InvalidArgument("no timing samples".into()));
        }
        if samples_ms.iter().any(|s| !s.is_finite()) {
            return Err(Error::InvalidArgument("non-finite timing sample".into()));
        }
        let mut sorted = samples_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median_ms = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Ok(Self {
            median_ms,
            min_ms: sorted[0],
            max_ms: sorted[n - 1],
            p10_ms: nearest_rank(&sorted, 10.0),
            p90_ms: nearest_rank(&sorted, 90.0),
            mean_ms: sorted.iter().sum::<f64>() / n as f64,
            samples_ms,
        })
    }
}

/// Nearest-rank percentile of a sorted, non-empty slice.
fn nearest_rank(sorted: &[f64], pct: f64) -> f64 {
    let n = sorted.len();
    let rank = ((pct / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// Untimed calls in a batch of the timed warm-up between two checks of the host clock.
const WARMUP_BATCH: usize = 4;

/// Times `work` on `stream`: `config.warmup` untimed calls (and more until
/// `config.warmup_ms` have passed), then `config.runs` calls each bracketed by CUDA events.
pub fn time_on_stream<F>(
    stream: &Arc<CudaStream>,
    config: TimingConfig,
    mut work: F,
) -> Result<Timing>
where
    F: FnMut(&Arc<CudaStream>) -> Result<()>,
{
    if config.runs == 0 {
        return Err(Error::InvalidArgument(
            "timing needs at least one run".into(),
        ));
    }
    let warm_start = Instant::now();
    for _ in 0..config.warmup {
        work(stream)?;
    }
    stream
        .synchronize()
        .map_err(Error::driver("synchronising after warm-up"))?;
    let warm_for = Duration::from_millis(u64::from(config.warmup_ms));
    while warm_start.elapsed() < warm_for {
        for _ in 0..WARMUP_BATCH {
            work(stream)?;
        }
        stream
            .synchronize()
            .map_err(Error::driver("synchronising after warm-up"))?;
    }
    let ctx = stream.context();
    let mut samples = Vec::with_capacity(config.runs);
    for _ in 0..config.runs {
        let start = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(Error::driver("creating a timing event"))?;
        let end = ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(Error::driver("creating a timing event"))?;
        start
            .record(stream)
            .map_err(Error::driver("recording the start event"))?;
        work(stream)?;
        end.record(stream)
            .map_err(Error::driver("recording the end event"))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(Error::driver("reading the elapsed time"))?;
        samples.push(f64::from(ms));
    }
    Timing::from_samples(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics() {
        let t = Timing::from_samples((1..=10).map(f64::from).collect()).unwrap();
        assert_eq!(t.median_ms, 5.5);
        assert_eq!(t.min_ms, 1.0);
        assert_eq!(t.max_ms, 10.0);
        assert_eq!(t.p10_ms, 1.0);
        assert_eq!(t.p90_ms, 9.0);
        assert_eq!(t.mean_ms, 5.5);

        let odd = Timing::from_samples(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!(odd.median_ms, 2.0);
        assert_eq!(odd.samples_ms, vec![3.0, 1.0, 2.0]);

        let one = Timing::from_samples(vec![4.0]).unwrap();
        assert_eq!((one.p10_ms, one.median_ms, one.p90_ms), (4.0, 4.0, 4.0));
    }

    #[test]
    fn rejects_bad_samples() {
        assert!(Timing::from_samples(vec![]).is_err());
        assert!(Timing::from_samples(vec![1.0, f64::NAN]).is_err());
    }
}
