//! The LSE merge of one partial attention state into a running one, in place, on the
//! GPU (`fragmask_kernels::family::combine::merge_into_source`): what a
//! context-parallel rank does with each part of its keys (docs/distributed.md).
//!
//! `lse' = M + log(e^(lse - M) + e^(lse_p - M))`, `o' = (e^(lse - M) o + e^(lse_p - M)
//! o_p) / (e^(lse - M) + e^(lse_p - M))` with `M = max(lse, lse_p)`, in fp32, `o'`
//! rounded once to the activation type; a row neither part sees keeps `o = 0`,
//! `lse = −∞`.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream};
use fragmask_kernels::family::combine::{merge_into_source, MERGE_INTO_KERNEL, MERGE_INTO_THREADS};
use fragmask_kernels::family::dtype::ActDtype;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::{launch, KernelArg, Launch};
use crate::module_cache::compile_for_device;
use crate::nvrtc::Compiler;

/// One `[batch, heads, seq, dim]` operand of a merge: its device address and strides in
/// elements (batch, heads, seq; the head dimension is contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawOperand {
    /// Device address of element (0, 0, 0, 0).
    pub ptr: u64,
    /// Strides of batch, heads and sequence, in elements.
    pub strides: [i64; 3],
}

/// The operands of one merge (see [`StateMerger::enqueue_raw`]).
#[derive(Clone, Copy, Debug)]
pub struct RawMerge {
    /// The running output (activation type), updated in place.
    pub o: RawOperand,
    /// The running lse (fp32), updated in place.
    pub lse: RawOperand,
    /// The partial output, `rows` rows per (batch, head).
    pub partial_o: RawOperand,
    /// The partial lse (fp32).
    pub partial_lse: RawOperand,
    /// Device address of `rows` int64 running-row indices, or 0: row `row_offset + r`.
    pub row_index: u64,
    /// The running row of partial row 0 when `row_index` is 0.
    pub row_offset: i64,
    /// Batch size.
    pub batch: usize,
    /// Heads.
    pub heads: usize,
    /// Partial rows per (batch, head).
    pub rows: usize,
    /// Head dimension (a multiple of 4, at most `4 * MERGE_INTO_THREADS`).
    pub dim: usize,
}

/// The compiled merge kernel of one activation type on one device.
#[derive(Debug)]
pub struct StateMerger {
    dtype: ActDtype,
    func: CudaFunction,
}

impl StateMerger {
    /// Compiles (NVRTC, cached on disk by `compiler`) and loads the merge kernel of
    /// `dtype` (bf16 or fp16).
    pub fn new(device: &Device, compiler: &Compiler, dtype: ActDtype) -> Result<Self> {
        if dtype == ActDtype::F32 {
            return Err(Error::InvalidArgument(
                "the state merge takes bf16 or fp16 outputs".into(),
            ));
        }
        let module = compile_for_device(
            device,
            compiler,
            &merge_into_source(dtype),
            &[MERGE_INTO_KERNEL],
        )?;
        Ok(Self {
            dtype,
            func: module.function(MERGE_INTO_KERNEL)?,
        })
    }

    /// The activation type of the outputs this merger takes.
    pub fn dtype(&self) -> ActDtype {
        self.dtype
    }

    /// Enqueues the merge of `m.partial_*` into `m.o` / `m.lse` on `stream`. Nothing is
    /// allocated or synchronised. Shape checks only: the addresses are the caller's.
    ///
    /// # Safety
    /// Every address of `m` must be a live allocation of this context holding the
    /// elements its strides reach for `batch × heads × rows` rows of `dim` (the running
    /// operands at the rows `row_index` / `row_offset` name, each named once), of this
    /// merger's activation type (`o`, `partial_o`) or fp32 (`lse`, `partial_lse`),
    /// `row_index` (when nonzero) `rows` int64 values; the partial operands must not
    /// overlap the running ones; all valid until `stream` has run the kernel, with
    /// their writes ordered before this call on `stream`.
    pub unsafe fn enqueue_raw(&self, stream: &Arc<CudaStream>, m: &RawMerge) -> Result<()> {
        let total = m
            .batch
            .checked_mul(m.heads)
            .and_then(|x| x.checked_mul(m.rows));
        let max_dim = 4 * MERGE_INTO_THREADS as usize;
        if m.dim == 0 || m.dim % 4 != 0 || m.dim > max_dim {
            return Err(Error::InvalidArgument(format!(
                "state merge: head dimension {} is not a multiple of 4 in 4..={max_dim}",
                m.dim
            )));
        }
        let ptrs = [m.o.ptr, m.lse.ptr, m.partial_o.ptr, m.partial_lse.ptr];
        if ptrs.contains(&0) {
            return Err(Error::InvalidArgument("state merge: a null operand".into()));
        }
        let (Some(total), Ok(batch), Ok(heads), Ok(rows), Ok(dim)) = (
            total,
            i32::try_from(m.batch),
            i32::try_from(m.heads),
            i64::try_from(m.rows),
            i32::try_from(m.dim),
        ) else {
            return Err(Error::InvalidArgument(
                "state merge: the shape does not fit the kernel's integers".into(),
            ));
        };
        if total == 0 {
            return Ok(());
        }
        let rows_per_cta = (MERGE_INTO_THREADS as usize) / (m.dim / 4);
        let grid = u32::try_from(total.div_ceil(rows_per_cta)).map_err(|_| {
            Error::InvalidArgument("state merge: too many rows for one grid".into())
        })?;
        let row_index = m.row_index;
        let row_offset = m.row_offset;
        let mut args = Vec::with_capacity(22);
        for op in [&m.o, &m.lse, &m.partial_o, &m.partial_lse] {
            args.push(KernelArg::new(&op.ptr));
            args.extend(op.strides.iter().map(KernelArg::new));
        }
        args.extend([
            KernelArg::new(&row_index),
            KernelArg::new(&row_offset),
            KernelArg::new(&batch),
            KernelArg::new(&heads),
            KernelArg::new(&rows),
            KernelArg::new(&dim),
        ]);
        // SAFETY: `fragmask_merge_into(fm_act*, i64 x3, float*, i64 x3, const fm_act*,
        // i64 x3, const float*, i64 x3, const i64*, i64, int, int, i64, int)`: the
        // arguments above in that order (pointers as u64). Each of the grid's
        // `rows_per_cta`-row CTAs reads and writes only rows below batch·heads·rows at
        // the addresses the strides give: this function's contract.
        unsafe {
            launch(
                stream,
                &self.func,
                Launch::new((grid, 1, 1), MERGE_INTO_THREADS),
                &args,
            )
        }
        .map_err(Error::driver("launching the state merge"))?;
        Ok(())
    }
}
