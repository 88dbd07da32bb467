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
    /// The gradients, laid out as the plan's `BackwardOptions::grad_strides` (16-byte aligned).
    pub grads: RawGradients,
}

/// Which of a backward's three kernels a run enqueues ([`BackwardPlan::run_stages`]),
/// and where the call's query rows lie in a workspace that several calls share.
///
/// Calls over the same query rows against different keys (the parts of one context-parallel
/// backward, docs/distributed.md) can share one workspace: the first enqueues the
/// preprocess, each enqueues its main kernel (they sum into one f32 dQ accumulator), the
/// last enqueues the postprocess, which casts the sum once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackwardStages {
    /// The preprocess (lse in log2, `Dsum`, the accumulator zeroed).
    pub pre: bool,
    /// The main kernel (dK, dV, and dQ reduced into the accumulator).
    pub main: bool,
    /// The postprocess (dQ cast from the accumulator).
    pub post: bool,
    /// `None`: the workspace's rows are the call's own. `Some`: the call's rows are a run
    /// of the rows of a call with more of them (no preprocess or postprocess of its own).
    pub rows: Option<SharedRows>,
}

impl BackwardStages {
    /// All three kernels over the call's own rows (what [`BackwardPlan::run`] enqueues).
    pub const ALL: Self = Self {
        pre: true,
        main: true,
        post: true,
        rows: None,
    };
}

/// The call's query rows as rows `offset..offset + Sq` of a call with `seqlen_q` rows
/// (same batch and heads), whose preprocess filled the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedRows {
    /// First row, a multiple of 128 (the workspace's row padding).
    pub offset: usize,
    /// The rows of the call that owns the workspace's layout.
    pub seqlen_q: usize,
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
    /// plan's shapes and strides, the gradients outputs of q's, k's and v's shapes in the
    /// plan's gradient strides that overlap nothing else, a mask's lists (fixed at planning) still alive,
    /// all valid until the kernels complete on `stream`, and no launch in flight on
    /// another stream may use `ws`.
    pub unsafe fn run(
        &self,
        stream: &Arc<CudaStream>,
        ptrs: &BackwardPointers,
        ws: &BackwardWorkspace,
    ) -> Result<(), AttentionError> {
        // SAFETY: the caller's contract, which is `run_stages`' with all three kernels.
        unsafe { self.run_stages(stream, ptrs, ws, &BackwardStages::ALL) }
    }

    /// Whether the plan pairs its key blocks (`BackwardKernel::with_paired_keys`: a 64x64
    /// mask's table was built from its host lists and uploaded at planning).
    pub fn paired_keys(&self) -> bool {
        self.resolved.kernel.paired_keys()
    }

    /// Whether the planned call dispatches the mask's key tiles largest first
    /// ([`super::BackwardOptions::tile_order`]).
    pub fn largest_first(&self) -> bool {
        self.resolved.params.0.tile_order != 0
    }

    /// How the planned kernel gets its lists' entries (`BackwardKernel::with_list_entries`;
    /// docs/masks.md, "Dense tile lists").
    pub fn list_entries(&self) -> fragmask_kernels::attention::ListEntries {
        self.resolved.kernel.list_entries()
    }

    /// The dQ reduction of the planned kernel (runs that share a workspace's accumulator
    /// must use one).
    pub fn dq_reduce(&self) -> super::DqReduce {
        self.resolved.kernel.dq_reduce()
    }

    /// As [`Self::run`], enqueuing only the kernels `stages` names, with the call's rows
    /// placed in the workspace as `stages.rows` says. Checks that the workspace fits the
    /// rows it names and that shared rows are whole 128-row runs inside them, in
    /// non-deterministic mode (whose semaphores are laid out per call); a run with shared
    /// rows enqueues neither the preprocess nor the postprocess.
    ///
    /// # Safety
    /// As [`Self::run`]. Also: a main kernel or postprocess enqueued without the
    /// preprocess reads the workspace as an earlier preprocess on `stream` left it, for a
    /// call with these rows (or, with `stages.rows`, the sharing call's rows, of the same
    /// batch, heads and head dimension) and the same O, dO and lse there; every run that
    /// reduces into the accumulator is of a plan with the same [`Self::dq_reduce`].
    pub unsafe fn run_stages(
        &self,
        stream: &Arc<CudaStream>,
        ptrs: &BackwardPointers,
        ws: &BackwardWorkspace,
        stages: &BackwardStages,
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
        let layout = match stages.rows {
            None => r.shape,
            Some(shared) => shared_layout(r.shape, r.kernel.deterministic(), shared, stages)?,
        };
        if !ws.fits(&layout) || (r.kernel.group_slices() > 1 && !ws.fits_kv_accum(&r.shape)) {
            return Err(AttentionError::Shape(format!(
                "the backward workspace is too small for {layout:?}"
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
        [p.dk_accum, p.dv_accum] = ws.kv_accum_ptrs(stream);
        if let Some(shared) = stages.rows {
            // The workspace is laid out by the sharing call's padded rows: [B, H, rows]
            // and [B, H, rows, D] f32 (the Bulk accumulator's 64-row steps are D * 64
            // floats each), so the call's rows start `offset` rows in.
            let rows = super::padded_rows(shared.seqlen_q).unwrap_or(0);
            p.seqlen_q_pad = i32::try_from(rows).map_err(|_| too_many_rows(rows))?;
            let offset = shared.offset as u64;
            p.lse_log2 += 4 * offset;
            p.dsum += 4 * offset;
            p.dq_accum += 4 * offset * r.shape.head_dim as u64;
        }
        let call = Resolved {
            functions: r.functions.clone(),
            maps,
            params,
            kernel: r.kernel,
            shape: r.shape,
            ctas: r.ctas,
            doc_items: r.doc_items.clone(),
            key_pairs: r.key_pairs.clone(),
            tile_order: r.tile_order.clone(),
            walks: r.walks.clone(),
        };
        // SAFETY: the plan's checks hold for these shapes and strides, the workspace fits
        // the rows the parameters name (checked above); the addresses and the workspace's
        // contents are this function's contract.
        unsafe { call.launch_stages(stream, [stages.pre, stages.main, stages.post]) }
    }
}

fn too_many_rows(rows: usize) -> AttentionError {
    AttentionError::Shape(format!(
        "{rows} query rows do not fit the kernels' int rows"
    ))
}

/// The shape whose workspace a run with shared rows indexes (the sharing call's rows),
/// after checking that the call's rows are whole padded runs inside them.
fn shared_layout(
    s: AttentionShape,
    deterministic: bool,
    shared: SharedRows,
    stages: &BackwardStages,
) -> Result<AttentionShape, AttentionError> {
    let pad = super::ROW_PAD as usize;
    let end = shared.offset.checked_add(s.seqlen_q);
    if stages.pre || stages.post {
        return Err(AttentionError::Shape(
            "a backward run over shared rows enqueues its main kernel only (the sharing call \
             runs the preprocess and the postprocess)"
                .to_string(),
        ));
    }
    if deterministic {
        return Err(AttentionError::Shape(
            "a backward run over shared rows cannot be deterministic (its semaphores are \
             laid out per call)"
                .to_string(),
        ));
    }
    if shared.offset % pad != 0 || s.seqlen_q % pad != 0 || end.is_none_or(|e| e > shared.seqlen_q)
    {
        return Err(AttentionError::Shape(format!(
            "shared rows: the call's {} rows at row {} must be whole runs of {pad} rows \
             inside the sharing call's {}",
            s.seqlen_q, shared.offset, shared.seqlen_q
        )));
    }
    Ok(AttentionShape {
        seqlen_q: shared.seqlen_q,
        ..s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(seqlen_q: usize) -> AttentionShape {
        AttentionShape {
            batch: 1,
            heads: 4,
            kv_heads: 2,
            seqlen_q,
            seqlen_k: 1024,
            head_dim: 128,
        }
    }

    const MAIN: BackwardStages = BackwardStages {
        pre: false,
        main: true,
        post: false,
        rows: None,
    };

    fn rows(offset: usize, seqlen_q: usize) -> SharedRows {
        SharedRows { offset, seqlen_q }
    }

    #[test]
    fn shared_rows_index_the_sharing_calls_workspace() {
        let got = shared_layout(shape(256), false, rows(384, 1024), &MAIN).unwrap();
        assert_eq!(got, shape(1024));
        // the last whole run
        assert!(shared_layout(shape(256), false, rows(768, 1024), &MAIN).is_ok());
    }

    #[test]
    fn shared_rows_past_the_sharing_call_or_not_whole_runs_are_refused() {
        for (sq, offset, total) in [
            (256, 896, 1024),        // past the end
            (256, 64, 1024),         // offset not a multiple of 128
            (192, 0, 1024),          // rows not a multiple of 128
            (256, usize::MAX, 1024), // overflow
        ] {
            assert!(
                shared_layout(shape(sq), false, rows(offset, total), &MAIN).is_err(),
                "{sq} rows at {offset} of {total}"
            );
        }
    }

    #[test]
    fn shared_rows_run_the_main_kernel_only_and_not_deterministic() {
        for (pre, post) in [(true, false), (false, true)] {
            let stages = BackwardStages { pre, post, ..MAIN };
            assert!(shared_layout(shape(256), false, rows(0, 1024), &stages).is_err());
        }
        assert!(shared_layout(shape(256), true, rows(0, 1024), &MAIN).is_err());
    }
}
