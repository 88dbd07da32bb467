//! The GPU state merge (`fragmask_host::merge::StateMerger`) for
//! `fragmask.distributed`: one partial `(o, lse)` merged into a running state in place,
//! on torch's stream, over tensors torch owns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fragmask_host::kernels::family::dtype::ActDtype;
use fragmask_host::merge::{RawMerge, RawOperand, StateMerger};
use fragmask_host::Compiler;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::gpu::{self, View};

/// A 3-D fp32 tensor `[B, H, S]`: address, shape, strides in elements.
pub(crate) type View3 = (u64, [usize; 3], [usize; 3]);

/// The compiled mergers per (device, activation type).
type Mergers = Mutex<HashMap<(usize, ActDtype), Arc<StateMerger>>>;

fn merger(device: usize, dtype: ActDtype) -> PyResult<Arc<StateMerger>> {
    static MERGERS: OnceLock<Mergers> = OnceLock::new();
    let mut cache = MERGERS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(m) = cache.get(&(device, dtype)) {
        return Ok(m.clone());
    }
    let g = gpu::gpu(device)?;
    let m = StateMerger::new(&g.device, &Compiler::new(), dtype)
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("merge_into: {e}")))?;
    cache.insert((device, dtype), m.clone());
    Ok(m)
}

fn strides3(s: &[usize]) -> PyResult<[i64; 3]> {
    let mut out = [0i64; 3];
    for (o, &x) in out.iter_mut().zip(s) {
        *o = i64::try_from(x)
            .map_err(|_| PyValueError::new_err("merge_into: a stride overflows"))?;
    }
    Ok(out)
}

/// Merges `partial_o` / `partial_lse` (`[B, H, R, D]`, `[B, H, R]`) into `o` / `lse`
/// (`[B, H, S, D]`, `[B, H, S]`) in place at the rows `row_index` (device int64 `[R]`,
/// in range: the caller's) or `row_offset ..  row_offset + R`, on `stream`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn merge_into_launch(
    o: View,
    lse: View3,
    partial_o: View,
    partial_lse: View3,
    row_index: u64,
    row_offset: i64,
    stream: u64,
    device: usize,
    fp16: bool,
) -> PyResult<()> {
    let [b, h, s, d] = o.1;
    let [pb, ph, rows, pd] = partial_o.1;
    let same = (pb, ph, pd) == (b, h, d)
        && lse.1 == [b, h, s]
        && partial_lse.1 == [b, h, rows]
        && o.2[3] == 1
        && partial_o.2[3] == 1;
    if !same {
        return Err(PyValueError::new_err(format!(
            "merge_into: o {:?}, lse {:?}, partial o {:?}, partial lse {:?} do not match \
             (the head dimension contiguous)",
            o.1, lse.1, partial_o.1, partial_lse.1
        )));
    }
    let end = row_offset.checked_add(i64::try_from(rows).unwrap_or(i64::MAX));
    if row_index == 0 && (row_offset < 0 || end.is_none_or(|e| e > s as i64)) {
        return Err(PyValueError::new_err(format!(
            "merge_into: rows {row_offset}..+{rows} outside the {s} rows of o"
        )));
    }
    let dtype = if fp16 { ActDtype::F16 } else { ActDtype::Bf16 };
    let m = merger(device, dtype)?;
    let g = gpu::gpu(device)?;
    // SAFETY: `stream` is torch's current stream of `device` (the wrapper reads it).
    let cuda_stream = unsafe { g.device.borrowed_stream(stream) };
    let raw = RawMerge {
        o: RawOperand {
            ptr: o.0,
            strides: strides3(&o.2[..3])?,
        },
        lse: RawOperand {
            ptr: lse.0,
            strides: strides3(&lse.2)?,
        },
        partial_o: RawOperand {
            ptr: partial_o.0,
            strides: strides3(&partial_o.2[..3])?,
        },
        partial_lse: RawOperand {
            ptr: partial_lse.0,
            strides: strides3(&partial_lse.2)?,
        },
        row_index,
        row_offset,
        batch: b,
        heads: h,
        rows,
        dim: d,
    };
    // SAFETY: the package's wrapper (fragmask.distributed._merge) passes data_ptr() and
    // the shapes and strides of live CUDA tensors of `device` whose dtypes it checked
    // (o and partial o of `dtype`, both lse fp32, row_index int64 [R] of row numbers
    // below S, distinct), the partial tensors separate from the running ones, and
    // torch's current stream, on which their writes are ordered.
    unsafe { m.enqueue_raw(&cuda_stream, &raw) }
        .map_err(|e| PyRuntimeError::new_err(format!("merge_into: {e}")))
}
