//! `fragmask::attention_backward`'s launch: the host's raw backward API
//! (`AttentionRunner::launch_backward_raw`) on tensors torch owns, on torch's current
//! stream. The backward's scratch (lse in log2, the row sums of dO∘O, the f32 dQ
//! accumulator) is a `BackwardWorkspace` kept per (device, stream) and grown when a
//! larger shape comes: launches on one stream are ordered, so they share it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fragmask_host::attention::backward::{
    BackwardOptions, BackwardPlan, BackwardPointers, BackwardStages, BackwardWorkspace, DqReduce,
    GradStrides, RawBackwardMask, RawGradients, SharedRows,
};
use fragmask_host::attention::choice;
use fragmask_host::attention::{AttentionShape, RawTensor, Window};
use fragmask_host::cudarc::driver::sys::CUstreamCaptureStatus;
use fragmask_host::device_lists::RawMaskLists;
use fragmask_kernels::family::dtype::ActDtype;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::gpu::{self, View};

type Workspaces = Mutex<HashMap<(usize, u64), Arc<Mutex<BackwardWorkspace>>>>;

fn workspaces() -> &'static Workspaces {
    static CACHE: OnceLock<Workspaces> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The workspace of (device, stream) that an earlier preprocess filled: it must exist
/// and fit `shape` (a fresh one would hold no preprocess).
fn filled_workspace(
    device: usize,
    stream: u64,
    shape: &AttentionShape,
) -> PyResult<Arc<Mutex<BackwardWorkspace>>> {
    let cache = workspaces().lock().unwrap_or_else(|e| e.into_inner());
    match cache.get(&(device, stream)) {
        Some(ws) if ws.lock().unwrap_or_else(|e| e.into_inner()).fits(shape) => Ok(ws.clone()),
        _ => Err(PyRuntimeError::new_err(
            "fragmask.attention backward (stages): no preprocess of these rows on the \
             workspace's stream (run the first call's preprocess first)",
        )),
    }
}

/// The workspace of (device, stream), at least as large as `shape` needs.
fn workspace(
    device: usize,
    stream: u64,
    cuda_stream: &Arc<fragmask_host::cudarc::driver::CudaStream>,
    shape: &AttentionShape,
) -> PyResult<Arc<Mutex<BackwardWorkspace>>> {
    let mut cache = workspaces().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ws) = cache.get(&(device, stream)) {
        // A GQA shape also needs the dK/dV accumulators of the group slices (else its
        // plan would run without them).
        if ws.lock().unwrap_or_else(|e| e.into_inner()).fits_all(shape) {
            return Ok(ws.clone());
        }
    }
    // A workspace allocated inside CUDA-graph capture would be the graph's memory: refuse,
    // so that the first backward of a shape runs eagerly (as the kernels' compilation must).
    let capturing = cuda_stream
        .capture_status()
        .map_err(|e| PyRuntimeError::new_err(format!("fragmask.attention backward: {e}")))?;
    if capturing != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Err(PyRuntimeError::new_err(
            "fragmask.attention backward: the first backward of this size cannot be captured \
             in a CUDA graph (it allocates the backward's workspace); run one backward of the \
             same (or a larger) shape on this stream before capturing",
        ));
    }
    let ws = BackwardWorkspace::new(cuda_stream, shape)
        .map(|w| Arc::new(Mutex::new(w)))
        .map_err(|e| {
            PyRuntimeError::new_err(format!("fragmask.attention backward: workspace: {e}"))
        })?;
    if cache.len() >= 16 {
        cache.clear();
    }
    cache.insert((device, stream), ws.clone());
    Ok(ws)
}

/// The backward of `fragmask::attention`: q, k, v, o, d_o as `[B, H, S, D]` views (D
/// contiguous, 16-byte strides), lse f32 `[B, H, Sq]` contiguous, dq / dk / dv fresh
/// contiguous outputs of q's / k's / v's shapes. `mask_id` 0 means no mask (causal and
/// window as the forward's); otherwise `lists` and `tlists` are the device addresses of
/// the mask's six forward lists and six transposed lists, and `mask_id` the registry
/// entry of a mask of the same geometry with transposed lists. `deterministic` orders
/// the dQ reductions (`BackwardOptions::deterministic`: bit-identical gradients run to
/// run, at a cost in time, docs/backward.md).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (q, k, v, o, lse, d_o, dq, dk, dv, mask_id, lists, tlists, causal,
                    window_left, window_right, scale, stream, device, fp16=false,
                    grad_strides=None, deterministic=false))]
pub(crate) fn attention_backward_launch(
    q: View,
    k: View,
    v: View,
    o: View,
    lse: u64,
    d_o: View,
    dq: u64,
    dk: u64,
    dv: u64,
    mask_id: u64,
    lists: Option<[u64; 6]>,
    tlists: Option<[u64; 6]>,
    causal: bool,
    window_left: i64,
    window_right: i64,
    scale: f64,
    stream: u64,
    device: usize,
    fp16: bool,
    grad_strides: Option<([usize; 3], [usize; 3])>,
    deterministic: bool,
) -> PyResult<()> {
    let handle = attention_backward_plan(
        q,
        k,
        v,
        o,
        d_o,
        mask_id,
        lists,
        tlists,
        causal,
        window_left,
        window_right,
        scale,
        stream,
        device,
        fp16,
        grad_strides,
        deterministic,
    )?;
    // The addresses are q's, k's, v's, o's and dO's own: the plan was made from their
    // views (shapes and strides) just above.
    handle.run(q.0, k.0, v.0, o.0, lse, d_o.0, dq, dk, dv, stream)
}

/// [`attention_backward_launch`] in stages, for calls over the same query rows that
/// sum into one dQ (the parts of a context-parallel backward): `pre`, `main`, `post` say
/// which of the three kernels to enqueue; `rows` are the query rows of the call whose
/// preprocess laid out this stream's workspace (the first of the calls), and
/// `row_offset` where this call's rows begin among them. A call with other rows than
/// `rows` enqueues its main kernel only (rows a whole number of 128-row runs). `dq` is
/// written by the postprocess only. Every call uses the default (bulk) dQ reduction and
/// the workspace of (device, `stream`): a run without the preprocess needs the one an
/// earlier run's preprocess filled there. Never deterministic: the host refuses the
/// deterministic mode over shared rows (its semaphores are laid out per call), and
/// `fragmask.distributed` refuses a deterministic backward before it gets here.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (q, k, v, o, lse, d_o, dq, dk, dv, mask_id, lists, tlists, causal,
                    window_left, window_right, scale, stream, device, fp16, pre, main, post,
                    rows, row_offset))]
pub(crate) fn attention_backward_stages(
    q: View,
    k: View,
    v: View,
    o: View,
    lse: u64,
    d_o: View,
    dq: u64,
    dk: u64,
    dv: u64,
    mask_id: u64,
    lists: Option<[u64; 6]>,
    tlists: Option<[u64; 6]>,
    causal: bool,
    window_left: i64,
    window_right: i64,
    scale: f64,
    stream: u64,
    device: usize,
    fp16: bool,
    pre: bool,
    main: bool,
    post: bool,
    rows: usize,
    row_offset: usize,
) -> PyResult<()> {
    let what = "fragmask.attention backward (stages)";
    let handle = attention_backward_plan(
        q,
        k,
        v,
        o,
        d_o,
        mask_id,
        lists,
        tlists,
        causal,
        window_left,
        window_right,
        scale,
        stream,
        device,
        fp16,
        None,
        false,
    )?;
    if handle.plan.dq_reduce() == DqReduce::Atomics {
        return Err(PyValueError::new_err(format!(
            "{what}: the plan reduces dQ with row-major atomics; staged calls share the register-order accumulator (bulk or fragment-order atomics)"
        )));
    }
    let shape = handle.plan.shape();
    let shared = if row_offset == 0 && rows == shape.seqlen_q {
        None
    } else {
        Some(SharedRows {
            offset: row_offset,
            seqlen_q: rows,
        })
    };
    let stages = BackwardStages {
        pre,
        main,
        post,
        rows: shared,
    };
    // SAFETY: torch's current stream of the plan's device, read by the wrapper.
    let cuda_stream = unsafe { handle.gpu.device.borrowed_stream(stream) };
    let layout = AttentionShape {
        seqlen_q: rows.max(shape.seqlen_q),
        ..shape
    };
    // A run with its preprocess may allocate the workspace; a run without one uses the
    // workspace an earlier preprocess on this stream filled.
    let ws = if pre {
        workspace(device, stream, &cuda_stream, &layout)?
    } else {
        filled_workspace(device, stream, &layout)?
    };
    let ws = ws.lock().unwrap_or_else(|e| e.into_inner());
    let ptrs = BackwardPointers {
        q: q.0,
        k: k.0,
        v: v.0,
        o: o.0,
        d_o: d_o.0,
        lse,
        grads: RawGradients { dq, dk, dv },
    };
    // SAFETY: the plan was made from these views just above; the wrapper passes live torch
    // tensors and the stages of one backward's calls in order on this stream (the device
    // API's contract), so the shared workspace holds the preprocess of these rows.
    unsafe { handle.plan.run_stages(&cuda_stream, &ptrs, &ws, &stages) }
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// Why the backward cannot read a mask packed at `block_m x block_n` at `head_dim`, or
/// `None` where it can (`choice::check_backward_mask_tile`). The forward of a call that
/// will need a backward asks it, so a mask at a forward-only tile (192x128, 128x80) is
/// refused before its forward runs rather than at the backward.
#[pyfunction]
pub(crate) fn backward_tile_refusal(head_dim: u32, block_m: u32, block_n: u32) -> Option<String> {
    choice::check_backward_mask_tile(head_dim, block_m, block_n)
        .err()
        .map(|e| e.to_string())
}

/// The plan of `key`: the cached one, or made now (with `ws`, a workspace that fits it)
/// and cached ([`plans`]).
fn cached_plan(
    g: &gpu::Gpu,
    key: &BackwardKey,
    ws: &BackwardWorkspace,
    stream: u64,
) -> PyResult<Arc<BackwardPlan>> {
    let cached = plans()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .cloned();
    if let Some(p) = cached {
        return Ok(p);
    }
    // A mask with documents runs the documents grid, and a 64x64 mask pairs its key
    // blocks, whose plans upload a table: a first call made while the stream is captured
    // into a CUDA graph plans the tile lists instead, which upload nothing.
    let capturing = gpu::capturing(g, stream)?;
    let p = Arc::new(plan_backward(g, key, ws, capturing)?);
    let mut cache = plans().lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= MAX_CACHED_PLANS {
        cache.clear();
    }
    cache.insert(*key, p.clone());
    Ok(p)
}

/// A planned backward whose runs pass addresses only (the eager autograd path's: the
/// wrapper keeps one per forward plan and layout of dO, so the tensors of a run have the
/// plan's shapes and strides by construction).
#[pyclass(frozen, module = "fragmask._fragmask", name = "BackwardPlanHandle")]
pub(crate) struct BackwardPlanHandle {
    gpu: Arc<gpu::Gpu>,
    plan: Arc<BackwardPlan>,
    device: usize,
    deterministic: bool,
}

/// Plans the backward of a call described as [`attention_backward_launch`]'s (the
/// views' addresses are not read), with the workspace of (`device`, `stream`); plans of
/// the deterministic mode and of the default one are cached apart.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (q, k, v, o, d_o, mask_id, lists, tlists, causal, window_left,
                    window_right, scale, stream, device, fp16=false, grad_strides=None,
                    deterministic=false))]
pub(crate) fn attention_backward_plan(
    q: View,
    k: View,
    v: View,
    o: View,
    d_o: View,
    mask_id: u64,
    lists: Option<[u64; 6]>,
    tlists: Option<[u64; 6]>,
    causal: bool,
    window_left: i64,
    window_right: i64,
    scale: f64,
    stream: u64,
    device: usize,
    fp16: bool,
    grad_strides: Option<([usize; 3], [usize; 3])>,
    deterministic: bool,
) -> PyResult<BackwardPlanHandle> {
    let what = "fragmask.attention backward";
    let key = BackwardKey {
        device,
        views: [q, k, v, o, d_o].map(|t| (t.1, t.2)),
        mask_id,
        lists,
        tlists,
        causal,
        window: (window_left, window_right),
        scale: scale.to_bits(),
        fp16,
        grad_strides,
        deterministic,
    };
    let g = gpu::gpu(device)?;
    // SAFETY: `stream` is torch's current stream of `device` (the wrapper reads it).
    let cuda_stream = unsafe { g.device.borrowed_stream(stream) };
    let shape = AttentionShape::from_tensors(q.1, k.1, v.1)
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    let ws = workspace(device, stream, &cuda_stream, &shape)?;
    let ws = ws.lock().unwrap_or_else(|e| e.into_inner());
    let plan = cached_plan(&g, &key, &ws, stream)?;
    Ok(BackwardPlanHandle {
        gpu: g,
        plan,
        device,
        deterministic,
    })
}

#[pymethods]
impl BackwardPlanHandle {
    /// Whether the plan pairs a 64x64 mask's key blocks (their table, built from the
    /// mask's host transposed lists, was uploaded at planning).
    #[getter]
    fn paired_keys(&self) -> bool {
        self.plan.paired_keys()
    }

    /// Whether the plan dispatches the mask's key tiles largest first (the GPU transposer's
    /// order, or one uploaded from host lists at planning; `BackwardOptions::tile_order`).
    #[getter]
    fn largest_first(&self) -> bool {
        self.plan.largest_first()
    }

    /// Whether the plan orders its dQ reductions (`BackwardOptions::deterministic`: the
    /// host refuses a plan that cannot, so a handle exists only where it does).
    #[getter]
    fn deterministic(&self) -> bool {
        self.deterministic
    }

    /// Enqueues the backward on `stream` at the addresses of tensors with the plan's
    /// shapes and strides (lse f32 `[B, H, Sq]`, dq / dk / dv fresh contiguous outputs),
    /// with the workspace of (device, `stream`).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        q: u64,
        k: u64,
        v: u64,
        o: u64,
        lse: u64,
        d_o: u64,
        dq: u64,
        dk: u64,
        dv: u64,
        stream: u64,
    ) -> PyResult<()> {
        let what = "fragmask.attention backward";
        // SAFETY: torch's current stream of the plan's device, read by the wrapper.
        let cuda_stream = unsafe { self.gpu.device.borrowed_stream(stream) };
        let ws = workspace(self.device, stream, &cuda_stream, &self.plan.shape())?;
        let ws = ws.lock().unwrap_or_else(|e| e.into_inner());
        let ptrs = BackwardPointers {
            q,
            k,
            v,
            o,
            d_o,
            lse,
            grads: RawGradients { dq, dk, dv },
        };
        // SAFETY: the wrapper finds this handle under the forward's plan key and dO's
        // strides, so q, k, v, o, dO (live torch CUDA tensors it holds) have the plan's
        // shapes and strides; lse is the forward's, dq, dk, dv fresh outputs; the
        // workspace is this stream's (the device API's contract).
        unsafe { self.plan.run(&cuda_stream, &ptrs, &ws) }
            .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
    }
}

/// Everything that decides a backward's plan (the key of [`plans`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct BackwardKey {
    device: usize,
    /// (shape, strides) of q, k, v, o and dO.
    views: [([usize; 4], [usize; 4]); 5],
    mask_id: u64,
    lists: Option<[u64; 6]>,
    tlists: Option<[u64; 6]>,
    causal: bool,
    window: (i64, i64),
    /// The scale's f64 bits.
    scale: u64,
    fp16: bool,
    /// dQ's and dK/dV's element strides [batch, head, row]; `None`: contiguous.
    grad_strides: Option<([usize; 3], [usize; 3])>,
    /// `BackwardOptions::deterministic`.
    deterministic: bool,
}

/// Most plans kept (a model has a few shapes; a key that recurs after the cache was
/// cleared is planned again).
const MAX_CACHED_PLANS: usize = 256;

/// The backward's plans by call, made once per distinct call (a mask's id is never
/// reused, so a plan of a collected mask is never hit again).
fn plans() -> &'static Mutex<HashMap<BackwardKey, Arc<BackwardPlan>>> {
    static PLANS: OnceLock<Mutex<HashMap<BackwardKey, Arc<BackwardPlan>>>> = OnceLock::new();
    PLANS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The host's plan of a backward call (every check, the kernel choice, tensor maps).
fn plan_backward(
    g: &gpu::Gpu,
    key: &BackwardKey,
    ws: &BackwardWorkspace,
    capturing: bool,
) -> PyResult<BackwardPlan> {
    let what = "fragmask.attention backward";
    let scale = f64::from_bits(key.scale) as f32;
    if !scale.is_finite() || scale <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what}: scale {scale} must be positive and finite"
        )));
    }
    let bound = |x: i64| -> PyResult<Option<u32>> {
        match x {
            -1 => Ok(None),
            x if x >= 0 => Ok(Some(u32::try_from(x).unwrap_or(u32::MAX))),
            x => Err(PyValueError::new_err(format!(
                "{what}: window bound {x}: expected -1 (unbounded) or >= 0"
            ))),
        }
    };
    let mut w = Window {
        left: bound(key.window.0)?,
        right: bound(key.window.1)?,
        diag_offset: 0,
    };
    if key.causal {
        w.right = Some(0);
    }
    let packed;
    let mask = match (key.mask_id, key.lists, key.tlists) {
        (0, _, _) => RawBackwardMask::Window(w),
        (id, Some(fwd), Some(bwd)) => {
            packed = gpu::mask(id)?;
            let lists = RawMaskLists::from_array;
            // Transposed lists built on the GPU come with their partial-tile count and order.
            let transposed = gpu::with_gpu_built(id, lists(bwd));
            RawBackwardMask::Blocks(&packed, lists(fwd), transposed)
        }
        _ => {
            return Err(PyValueError::new_err(format!(
                "{what}: a mask needs its forward and transposed lists"
            )))
        }
    };
    let [q, k, v, o, d_o] = key.views.map(|(shape, strides)| RawTensor {
        ptr: 0,
        shape,
        strides,
    });
    // The deterministic mode refuses the documents grid and paired key blocks; their
    // defaults (`None`, as here outside capture) leave them out of its plans
    // (`choice::backward_documents`, `choice::backward_paired_keys`). Under capture nothing
    // is uploaded, so the key tiles run largest first only where the GPU wrote their order.
    let order_on_device = matches!(mask, RawBackwardMask::Blocks(_, _, t) if t.tile_order != 0);
    let opts = BackwardOptions {
        scale: Some(scale),
        deterministic: key.deterministic,
        dtype: key.fp16.then_some(ActDtype::F16),
        documents_grid: capturing.then_some(false),
        paired_keys: capturing.then_some(false),
        tile_order: (capturing && !order_on_device).then_some(false),
        grad_strides: key.grad_strides.map(|(dq, dkv)| GradStrides { dq, dkv }),
        ..BackwardOptions::default()
    };
    g.attention
        .plan_backward(&q, &k, &v, &o, &d_o, &mask, &opts, ws)
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}
