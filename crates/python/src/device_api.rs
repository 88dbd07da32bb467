//! The functions that take device addresses and stream handles as Python ints (the GPU
//! launches), kept off the module's attributes.
//!
//! A launch cannot check that an integer is the address of a live device allocation of
//! the right size without a driver query per pointer (`cuMemGetAddressRange` costs
//! about as much as the whole launch path we aim for), and a stream handle cannot be
//! checked at all: a bogus one is dereferenced by the driver. So these functions are not
//! reachable by importing the extension: [`claim_device_api`] returns them once, and the
//! `fragmask` package claims them while it is imported (Python imports a package before
//! any of its submodules, so `import fragmask._fragmask` has run the claim before user
//! code sees the module). Every later claim raises. The package's wrappers pass only
//! `data_ptr()` of torch tensors they checked, and torch's own stream handles.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

static CLAIMED: AtomicBool = AtomicBool::new(false);

/// The device-address functions as a dict, to the first caller only (the `fragmask`
/// package, at import); later calls raise `RuntimeError`.
#[pyfunction]
pub(crate) fn claim_device_api(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    if CLAIMED.swap(true, Ordering::SeqCst) {
        return Err(PyRuntimeError::new_err(
            "the device API of fragmask._fragmask was claimed by the fragmask package; \
             use fragmask.attention, fragmask.decode, fragmask.AttentionPlan, ...",
        ));
    }
    let api = PyDict::new(py);
    api.set_item(
        "attention_launch",
        wrap_pyfunction!(crate::gpu::attention_launch, py)?,
    )?;
    api.set_item(
        "attention_backward_launch",
        wrap_pyfunction!(crate::backward::attention_backward_launch, py)?,
    )?;
    api.set_item(
        "lightning_decode",
        wrap_pyfunction!(crate::gpu::lightning_decode, py)?,
    )?;
    api.set_item(
        "decode_launch",
        wrap_pyfunction!(crate::decode::decode_launch, py)?,
    )?;
    api.set_item(
        "gpu_pack_plan",
        wrap_pyfunction!(crate::gpu::gpu_pack_plan, py)?,
    )?;
    api.set_item(
        "gpu_transpose_plan",
        wrap_pyfunction!(crate::transpose::gpu_transpose_plan, py)?,
    )?;
    api.set_item(
        "attention_plan",
        wrap_pyfunction!(crate::plan::attention_plan, py)?,
    )?;
    api.set_item(
        "record_dispatch_order",
        wrap_pyfunction!(crate::gpu::record_dispatch_order, py)?,
    )?;
    api.set_item(
        "decode_plan",
        wrap_pyfunction!(crate::plan::decode_plan, py)?,
    )?;
    api.set_item(
        "merge_into_launch",
        wrap_pyfunction!(crate::merge::merge_into_launch, py)?,
    )?;
    api.set_item(
        "attention_backward_stages",
        wrap_pyfunction!(crate::backward::attention_backward_stages, py)?,
    )?;
    api.set_item(
        "attention_backward_plan",
        wrap_pyfunction!(crate::backward::attention_backward_plan, py)?,
    )?;
    api.set_item(
        "lightning_plan",
        wrap_pyfunction!(crate::gpu::lightning_plan, py)?,
    )?;
    Ok(api)
}
