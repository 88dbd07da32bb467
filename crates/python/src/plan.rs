//! Plan objects: an attention forward or a decode call planned once (every check, the
//! kernel, the split count, the workspace sizes, the tensor maps and the parameter
//! block: `fragmask_host::attention::AttentionPlan`, `fragmask_host::decode::DecodePlan`)
//! and run many times, each run patching the call's addresses and launching. The
//! Python classes `fragmask.AttentionPlan` and `fragmask.DecodePlan` hold them; the
//! functions that make them are part of the private device API (`device_api`).

use std::sync::Arc;

use fragmask_host::attention::{AttentionPlan, PlanPointers};
use fragmask_host::decode::{DecodePlan, DecodePointers, DecodeRunner};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::gpu::{cached_plan, gpu, Gpu, PlanKey, View};

/// A planned attention forward (`fragmask.AttentionPlan` holds one).
#[pyclass(frozen, module = "fragmask._fragmask", name = "AttentionPlanHandle")]
pub(crate) struct AttentionPlanHandle {
    gpu: Arc<Gpu>,
    plan: Arc<AttentionPlan>,
    /// (shape, strides) of q, k and v as the caller passes them (its layout).
    views: [([usize; 4], [usize; 4]); 3],
}

/// Plans a forward for tensors with the shapes and strides of the views `q`, `k`, `v`
/// (their addresses are not read); the arguments are `attention_launch`'s. `stream`:
/// torch's current stream of `device`, whose capture state a new plan follows (under
/// CUDA-graph capture it uploads nothing, `gpu::plan_attention`); None plans as outside
/// capture.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (q, k, v, mask_id, lists, causal, window_left, window_right, scale, bshd,
                    device, fp16=false, splits=0, stream=None))]
pub(crate) fn attention_plan(
    q: View,
    k: View,
    v: View,
    mask_id: u64,
    lists: Option<[u64; 6]>,
    causal: bool,
    window_left: i64,
    window_right: i64,
    scale: Option<f64>,
    bshd: bool,
    device: usize,
    fp16: bool,
    splits: u32,
    stream: Option<u64>,
) -> PyResult<AttentionPlanHandle> {
    let key = PlanKey::new(
        device,
        &q,
        &k,
        &v,
        mask_id,
        lists,
        causal,
        (window_left, window_right),
        scale,
        bshd,
        fp16,
        splits,
    );
    let g = gpu(device)?;
    // The eager path's cache: a plan object and eager calls of the same call share one.
    let plan = cached_plan(&g, &key, stream)?;
    Ok(AttentionPlanHandle {
        gpu: g,
        plan,
        views: [key.q, key.k, key.v],
    })
}

#[pymethods]
impl AttentionPlanHandle {
    /// Split-KV splits per row block (1: none).
    #[getter]
    fn splits(&self) -> u32 {
        self.plan.splits
    }

    /// The split tail, `(tiles, splits)`: the launch's last work tiles run as that many
    /// splits each (docs/architecture.md, "Split tail"); None without one.
    #[getter]
    fn tail(&self) -> Option<(u32, u32)> {
        self.plan.tail.map(|t| (t.tiles, t.splits))
    }

    /// The planned kernel's label (`AttentionKernel::label`: tile, dtype, head dim, mask
    /// mode and variants).
    #[getter]
    fn kernel(&self) -> String {
        self.plan.kernel.label()
    }

    /// (o floats, lse floats) of the split-KV workspace (0, 0 without splits).
    #[getter]
    fn workspace_floats(&self) -> (usize, usize) {
        self.plan.workspace_floats
    }

    /// Whether the plan runs the 64-token tile's shared K/V (its step table, built from
    /// the mask's host lists, was uploaded at planning).
    #[getter]
    fn shared_kv(&self) -> bool {
        self.plan.shared_kv()
    }

    /// Whether the plan runs a mask's row blocks largest first (the GPU packer's order, or
    /// one uploaded from host lists at planning; `AttentionOptions::tile_order`).
    #[getter]
    fn largest_first(&self) -> bool {
        self.plan.largest_first()
    }

    /// Launches on `stream`: q, k, v as `(address, shape, strides)` views, which must
    /// have the plan's shapes and strides (else `ValueError` naming the tensor); out in
    /// the plan's layout (contiguous `[B, Sq, H, D]` when planned `bshd`, else contiguous
    /// `[B, H, Sq, D]`), lse contiguous, the workspace of `workspace_floats` (0 without splits).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        q: View,
        k: View,
        v: View,
        out: u64,
        lse: u64,
        ws_o: u64,
        ws_lse: u64,
        stream: u64,
    ) -> PyResult<()> {
        for ((name, view), planned) in [("q", &q), ("k", &k), ("v", &v)].iter().zip(&self.views) {
            if (view.1, view.2) != *planned {
                return Err(PyValueError::new_err(format!(
                    "fragmask.AttentionPlan.run: {name} is not the plan's: expected shape {:?} \
                     and strides {:?}, got {:?} and {:?}",
                    planned.0, planned.1, view.1, view.2
                )));
            }
        }
        let ptrs = PlanPointers {
            q: q.0,
            k: k.0,
            v: v.0,
            o: out,
            lse,
            ws_o,
            ws_lse,
        };
        // SAFETY: q, k, v have the plan's shapes and strides (checked above);
        // `fragmask.AttentionPlan.run` checks that they are CUDA tensors of the plan's
        // device and dtype, allocates out and lse of the plan's sizes and holds the
        // workspace and the mask's lists (the device API's contract: only the package
        // reaches this method's constructor).
        unsafe { self.enqueue(&ptrs, stream, "fragmask.AttentionPlan") }
    }

    /// [`Self::run`] at addresses alone: the eager `fragmask.attention` path, whose
    /// plan cache is keyed by the tensors' shapes, strides, dtype and device, so the
    /// tensors it passes are the plan's by construction, and `AttentionPlan.run` once it
    /// has compared its views with the plan's (no views to convert or compare here).
    /// Launch errors name `what`, the caller.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (q, k, v, out, lse, ws_o, ws_lse, stream, what = "fragmask.attention"))]
    fn run_ptrs(
        &self,
        q: u64,
        k: u64,
        v: u64,
        out: u64,
        lse: u64,
        ws_o: u64,
        ws_lse: u64,
        stream: u64,
        what: &str,
    ) -> PyResult<()> {
        let ptrs = PlanPointers {
            q,
            k,
            v,
            o: out,
            lse,
            ws_o,
            ws_lse,
        };
        // SAFETY: `fragmask.attention` finds this handle under the shapes, strides,
        // dtype and device of q, k and v (its cache key), and `AttentionPlan.run` compares
        // them with the plan's before it calls; both allocate out and lse of the plan's
        // sizes and the workspace of `workspace_floats`, and hold the mask whose lists
        // the plan reads (the device API's contract).
        unsafe { self.enqueue(&ptrs, stream, what) }
    }
}

impl AttentionPlanHandle {
    /// Enqueues the plan on torch's `stream` at `ptrs`; errors name `what`.
    ///
    /// # Safety
    /// `ptrs` are live tensors of the plan's device with the plan's shapes, strides and
    /// sizes, and the workspace and mask lists the plan reads stay alive until the launch
    /// completes (the callers' contracts).
    unsafe fn enqueue(&self, ptrs: &PlanPointers, stream: u64, what: &str) -> PyResult<()> {
        // SAFETY: torch's current stream of the plan's device, read by the wrapper.
        let stream = unsafe { self.gpu.device.borrowed_stream(stream) };
        // SAFETY: the caller's contract (above).
        unsafe { self.plan.run(&stream, ptrs) }
            .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
    }
}

/// A planned decode call (`fragmask.DecodePlan` holds one).
#[pyclass(frozen, module = "fragmask._fragmask", name = "DecodePlanHandle")]
pub(crate) struct DecodePlanHandle {
    gpu: Arc<Gpu>,
    runner: Arc<DecodeRunner>,
    plan: DecodePlan,
    /// (o floats, lse floats) of the workspace.
    workspace: (usize, usize),
    lse_shape: Vec<usize>,
}

/// Plans a decode call from shapes (`decode_plan`'s arguments, the device's
/// multiprocessor count read once) and loads its kernel.
#[pyfunction]
#[pyo3(signature = (q, k, v, dtypes, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, window_left, window_right, scale, splits, device, mask_id=0, head_major=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_plan(
    q: Vec<usize>,
    k: Vec<usize>,
    v: Vec<usize>,
    dtypes: (String, String, String),
    block_table: Option<Vec<usize>>,
    seqlens_k: Option<Vec<usize>>,
    cu_seqlens_q: Option<Vec<usize>>,
    max_seqlen_q: usize,
    window_left: i64,
    window_right: i64,
    scale: f64,
    splits: usize,
    device: usize,
    mask_id: u64,
    head_major: bool,
) -> PyResult<DecodePlanHandle> {
    let g = gpu(device)?;
    let sms = g.sm_count()?;
    let plan = crate::decode::plan_from_shapes(
        &q,
        &k,
        &v,
        [&dtypes.0, &dtypes.1, &dtypes.2],
        block_table.as_deref(),
        seqlens_k.as_deref(),
        cu_seqlens_q.as_deref(),
        max_seqlen_q,
        (window_left, window_right),
        scale,
        mask_id,
        sms,
        splits,
        head_major,
    )?;
    let workspace = plan.workspace_floats().map_err(crate::decode::err)?;
    let lse_shape = crate::decode::lse_shape(&plan);
    let runner = crate::decode::runner(device, plan.config)?;
    Ok(DecodePlanHandle {
        gpu: g,
        runner,
        plan,
        workspace,
        lse_shape,
    })
}

#[pymethods]
impl DecodePlanHandle {
    /// Splits of the key range.
    #[getter]
    fn splits(&self) -> usize {
        self.plan.num_splits
    }

    /// (o floats, lse floats) of the workspace.
    #[getter]
    fn workspace_floats(&self) -> (usize, usize) {
        self.workspace
    }

    /// The lse's shape.
    #[getter]
    fn lse_shape(&self) -> Vec<usize> {
        self.lse_shape.clone()
    }

    /// Launches on `stream` (every address of a tensor the wrapper checked against the
    /// plan; 0 for an absent table, length, offset or mask array).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (q, k, v, out, lse, ws_o, ws_lse, block_table, seqlens_k, cu_seqlens_q, mask, stream))]
    fn run(
        &self,
        q: u64,
        k: u64,
        v: u64,
        out: u64,
        lse: u64,
        ws_o: u64,
        ws_lse: u64,
        block_table: u64,
        seqlens_k: u64,
        cu_seqlens_q: u64,
        mask: (u64, u64, u64),
        stream: u64,
    ) -> PyResult<()> {
        // SAFETY: torch's current stream of the plan's device, read by the wrapper.
        let stream = unsafe { self.gpu.device.borrowed_stream(stream) };
        let runner = self.runner.with_stream(stream);
        let pointers = DecodePointers {
            q,
            k,
            v,
            o: out,
            lse,
            ws_o,
            ws_lse,
            seqlens_k,
            // An unpaged call never reads the table; a valid address all the same.
            block_table: if block_table == 0 { q } else { block_table },
            cu_seqlens_q,
            mask_list: mask.0,
            mask_count: mask.1,
            mask_bits: mask.2,
        };
        // SAFETY: `fragmask.DecodePlan.run` checks every tensor against the plan
        // (device, dtype, shape, contiguity) and allocates out, lse and the workspace
        // of the plan's sizes (the device API's contract).
        unsafe { runner.launch_raw(&self.plan, &pointers) }.map_err(crate::decode::err)
    }
}
