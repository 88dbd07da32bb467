//! A backward planned once and run many times ([`BackwardPlan`]), as the forward's
//! [`super::super::AttentionPlan`].
//!
//! Planning does every check of a call (shapes, strides, the mask's fit and transposed
//! lists, the scale), the kernel choice, the four TMA descriptors and the parameter
//! block. Running a plan copies them, patches the call's addresses
//! (`cuTensorMapReplaceAddress`, CUDA driver API, "Tensor Map Object Management"; the
//! parameter block's pointer fields and the workspace's) and enqueues the three kernels:
//! no allocation, no synchronisation, no mask scan, so a run can be captured in a CUDA
//! graph.

use std::sync::Arc;

use cudarc::driver::{sys, CudaStream};

use super::{
    BackwardOptions, BackwardWorkspace, RawBackwardMask, RawGradients, Resolved, TensorMapArg,
    Upload,
};
use crate::attention::{driver, AttentionError, AttentionRunner, AttentionShape, RawTensor};

/// The address a plan's tensor maps and pointers are made with before a run patches in
/// the call's (16-byte aligned, never dereferenced).
const PLACEHOLDER_ADDRESS: u64 = 1 << 20;

/// A backward call resolved once: kernels, tensor maps and parameters.
pub struct BackwardPlan {
    resolved: Resolved,
}

impl std::fmt::Debug for BackwardPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackwardPlan")
            .field("kernel", &self.resolved.kernel)
            .field("shape", &self.resolved.shape)
            .finish_non_exhaustive()
    }
}

/// The addresses of one run of a [`BackwardPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackwardPointers {
    /// q, k, v, o, dO: element `[0, 0, 0, 0]` of tensors with the plan's shapes and
    /// strides (q, k, v and dO 16-byte aligned, o 4-byte aligned).
    pub q: u64,
    /// See `q`.
    pub k: u64,
    /// See `q`.
    pub v: u64,
    /// See `q`.
    pub o: u64,
    /// See `q`.
    pub d_o: u64,
    /// The forward's contiguous f32 `[B, H, Sq]` log-sum-exp (4-byte aligned).
    pub lse: u64,
    /// Contiguous gradients (16-byte aligned).
    pub grads: RawGradients,
}

impl AttentionRunner {
    /// Plans a backward over tensors with the shapes and strides of `q`, `k`, `v`, `o`
    /// and `d_o` (their `ptr` fields are not read: each run brings its own), checked as
    /// [`AttentionRunner::launch_backward_raw`] checks a call. `ws` is a workspace that
    /// fits the call (a run may bring another that fits); the kernels are compiled here
    /// if they were not yet.
    #[allow(clippy::too_many_arguments)]
    pub fn plan_backward(
        &self,
        q: &RawTensor,
        k: &RawTensor,
        v: &RawTensor,
        o: &RawTensor,
        d_o: &RawTensor,
        mask: &RawBackwardMask<'_>,
        opts: &BackwardOptions,
        ws: &BackwardWorkspace,
    ) -> Result<BackwardPlan, AttentionError> {
        let at = |t: &RawTensor| RawTensor {
            ptr: PLACEHOLDER_ADDRESS,
            ..*t
        };
        let grads = RawGradients {
            dq: PLACEHOLDER_ADDRESS,
            dk: PLACEHOLDER_ADDRESS,
            dv: PLACEHOLDER_ADDRESS,
        };
        let resolved = self.resolve(
            &at(q),
            &at(k),
            &at(v),
            &at(o),
            PLACEHOLDER_ADDRESS,
            &at(d_o),
            mask,
            opts,
            grads,
            ws,
            Upload::Allowed,
        )?;
        Ok(BackwardPlan { resolved })
    }
}

/// Replaces the global address of a copy of a plan's tensor map.
fn patch(map: &mut TensorMapArg, address: u64) -> Result<(), AttentionError> {
    // SAFETY: `map` is a valid, initialised 64-byte-aligned CUtensorMap (encoded by
    // `plan_backward`); the driver rewrites its address field in host memory only.
    unsafe { sys::cuTensorMapReplaceAddress(&mut map.0, address as *mut std::ffi::c_void) }
        .result()
        .map_err(driver("patching a tensor map (cuTensorMapReplaceAddress)"))
}

impl BackwardPlan {
    /// The shapes it was planned for.
    pub fn shape(&self) -> AttentionShape {
        self.resolved.shape
    }

    /// Enqueues the preprocess, main and postprocess kernels on `stream` at `ptrs`,
    /// with `ws` (which must fit the plan's shape) as the workspace. Checks the
    /// alignments the kernels need; nothing else is re-planned.
    ///
    /// # Safety
    /// q, k, v, o, dO and lse must be live device tensors of this context with the
    /// plan's shapes and strides, the gradients contiguous outputs of q's, k's and v's
    /// shapes that overlap nothing else, a mask's lists (fixed at planning) still alive,
    /// all valid until the kernels complete on `stream`, and no launch in flight on
    /// another stream may use `ws`.
    pub unsafe fn run(
        &self,
        stream: &Arc<CudaStream>,
        ptrs: &BackwardPointers,
        ws: &BackwardWorkspace,
    ) -> Result<(), AttentionError> {
        let g = ptrs.grads;
        if [ptrs.q, ptrs.k, ptrs.v, ptrs.d_o, g.dq, g.dk, g.dv]
            .iter()
            .any(|p| *p == 0 || p % 16 != 0)
            || [ptrs.o, ptrs.lse].iter().any(|p| *p == 0 || p % 4 != 0)
        {
            return Err(AttentionError::Shape(format!(
                "q, k, v, dO, dq, dk and dv must be non-null and 16-byte aligned, o and lse \
                 4-byte aligned; got {ptrs:?}"
            )));
        }
        let r = &self.resolved;
        if !ws.fits(&r.shape) {
            return Err(AttentionError::Shape(format!(
                "the backward workspace is too small for {:?}",
                r.shape
            )));
        }
        let mut maps = r.maps;
        for (map, address) in maps.iter_mut().zip([ptrs.q, ptrs.k, ptrs.v, ptrs.d_o]) {
            patch(map, address)?;
        }
        let mut params = r.params;
        let p = &mut params.0;
        (p.o, p.d_o, p.lse) = (ptrs.o, ptrs.d_o, ptrs.lse);
        (p.dq, p.dk, p.dv) = (g.dq, g.dk, g.dv);
        [p.lse_log2, p.dsum, p.dq_accum, p.sem] = ws.device_ptrs(stream);
        let call = Resolved {
            functions: r.functions.clone(),
            maps,
            params,
            kernel: r.kernel,
            shape: r.shape,
            ctas: r.ctas,
            doc_items: r.doc_items.clone(),
        };
        // SAFETY: the plan's checks hold for these shapes and strides; the addresses are
        // this function's contract.
        unsafe { call.launch(stream) }
    }
}
