//! The backward's scratch ([`BackwardWorkspace`]): what the three launches of a call share
//! besides its tensors, allocated once and reused by every call whose shape fits.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use fragmask_kernels::attention::backward::{ROW_PAD, STEP_M};

use super::super::{driver, AttentionError, AttentionShape};

/// The backward's scratch: lse in log2 and `Dsum` (`[B, H, Sq_pad]` f32), the f32 dQ
/// accumulator (`[B, H, Sq_pad, D]`), the deterministic mode's semaphores, for every
/// call whose shape [`Self::fits`], and for GQA shapes the f32 dK and dV accumulators of
/// the group slices (`[B, Hkv, Sk, D]` each; `BackwardKernel::with_group_slices`,
/// [`Self::fits_kv_accum`]). `Sq_pad` is `Sq` rounded up to 128.
#[derive(Debug)]
pub struct BackwardWorkspace {
    lse_log2: CudaSlice<f32>,
    dsum: CudaSlice<f32>,
    dq_accum: CudaSlice<f32>,
    sem: CudaSlice<i32>,
    dk_accum: CudaSlice<f32>,
    dv_accum: CudaSlice<f32>,
}

/// Elements of each f32 dK/dV accumulator of the group slices for `shape`: `[B, Hkv, Sk,
/// D]` where query heads share a KV head (GQA, MQA), else none.
pub(super) fn kv_accum_len(shape: &AttentionShape) -> Result<usize, AttentionError> {
    if shape.heads <= shape.kv_heads {
        return Ok(0);
    }
    shape
        .batch
        .checked_mul(shape.kv_heads)
        .and_then(|n| n.checked_mul(shape.seqlen_k))
        .and_then(|n| n.checked_mul(shape.head_dim))
        .ok_or_else(|| AttentionError::Shape(format!("backward workspace of {shape:?} overflows")))
}

/// Rows of the workspace for `seqlen_q`: rounded up to [`ROW_PAD`].
pub(super) fn padded_rows(seqlen_q: usize) -> Option<usize> {
    seqlen_q.checked_next_multiple_of(ROW_PAD as usize)
}

/// Element counts of the workspace of `shape`: `(rows, accumulator, semaphores)`.
pub(super) fn workspace_len(
    shape: &AttentionShape,
) -> Result<(usize, usize, usize), AttentionError> {
    let too_big = || AttentionError::Shape(format!("backward workspace of {shape:?} overflows"));
    let rows = padded_rows(shape.seqlen_q)
        .and_then(|r| r.checked_mul(shape.batch * shape.heads))
        .ok_or_else(too_big)?;
    let accum = rows.checked_mul(shape.head_dim).ok_or_else(too_big)?;
    // One semaphore per (row step, column group); at most D / 64 groups.
    let sem = (rows / STEP_M as usize)
        .checked_mul(shape.head_dim / 64)
        .ok_or_else(too_big)?;
    Ok((rows, accum, sem))
}

impl BackwardWorkspace {
    /// Allocates the workspace of `shape` on `stream`.
    pub fn new(stream: &Arc<CudaStream>, shape: &AttentionShape) -> Result<Self, AttentionError> {
        shape.validate()?;
        let (rows, accum, sem) = workspace_len(shape)?;
        let alloc = |n: usize| -> Result<CudaSlice<f32>, AttentionError> {
            // SAFETY: the preprocess writes every element before the main kernel reads it.
            unsafe { stream.alloc::<f32>(n) }.map_err(driver("allocating the backward workspace"))
        };
        let kv = kv_accum_len(shape)?.max(1);
        Ok(Self {
            lse_log2: alloc(rows)?,
            dsum: alloc(rows)?,
            dq_accum: alloc(accum)?,
            // SAFETY: as above (the launch zeroes them before the main kernel adds into them).
            dk_accum: alloc(kv)?,
            dv_accum: alloc(kv)?,
            // SAFETY: as above (the preprocess zeroes the semaphores).
            sem: unsafe { stream.alloc::<i32>(sem.max(1)) }
                .map_err(driver("allocating the backward workspace"))?,
        })
    }

    /// Whether this workspace is large enough for `shape`.
    pub fn fits(&self, shape: &AttentionShape) -> bool {
        workspace_len(shape).is_ok_and(|(rows, accum, sem)| {
            self.lse_log2.len() >= rows
                && self.dsum.len() >= rows
                && self.dq_accum.len() >= accum
                && self.sem.len() >= sem
        })
    }

    /// Whether this workspace holds every buffer a backward of `shape` can use: [`Self::fits`]
    /// and, for a GQA shape, the group slices' accumulators ([`Self::fits_kv_accum`]), so that
    /// the default group slices are not given up for want of them.
    pub fn fits_all(&self, shape: &AttentionShape) -> bool {
        self.fits(shape) && (kv_accum_len(shape).is_ok_and(|n| n == 0) || self.fits_kv_accum(shape))
    }

    /// Whether the group slices' dK and dV accumulators hold `shape`'s keys (a GQA shape
    /// at most this workspace's `B · Hkv · Sk · D`).
    pub fn fits_kv_accum(&self, shape: &AttentionShape) -> bool {
        kv_accum_len(shape)
            .is_ok_and(|n| n > 0 && self.dk_accum.len() >= n && self.dv_accum.len() >= n)
    }

    /// Device addresses `[lse_log2, dsum, dq_accum, sem]`.
    pub(super) fn device_ptrs(&self, stream: &Arc<CudaStream>) -> [u64; 4] {
        [
            self.lse_log2.device_ptr(stream).0,
            self.dsum.device_ptr(stream).0,
            self.dq_accum.device_ptr(stream).0,
            self.sem.device_ptr(stream).0,
        ]
    }

    /// Device addresses `[dk_accum, dv_accum]` of the group slices.
    pub(super) fn kv_accum_ptrs(&self, stream: &Arc<CudaStream>) -> [u64; 2] {
        [
            self.dk_accum.device_ptr(stream).0,
            self.dv_accum.device_ptr(stream).0,
        ]
    }
}
