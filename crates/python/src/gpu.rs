//! The GPU ops: launches on tensors torch owns, on torch's current stream, in the
//! primary context torch and cudarc share. Nothing here allocates device memory,
//! synchronises the host or prints; compilation happens at the first call of a
//! configuration or in `warmup` (so CUDA-graph capture never compiles).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use fragmask_host::attention::blockmask::{self, KERNEL_ENCODING};
use fragmask_host::attention::{
    AttentionOptions, AttentionPlan, AttentionRunner, PlanPointers, RawMask, RawTensor, Window,
};
use fragmask_host::cudarc::driver::sys::CUstreamCaptureStatus;
use fragmask_host::cudarc::driver::{result as driver, CudaEvent};
use fragmask_host::device_lists::{RawBlockLists, RawMaskLists};
use fragmask_host::gpu_packer::{GpuPacker, GpuTransposer, PackShape, RawPackBuffers};
use fragmask_host::lightning::{LightningDecode, LightningPlan};
use fragmask_host::{Compiler, Device};
use fragmask_kernels::family::dtype::ActDtype;
use fragmask_kernels::lightning::LightningProblem;
use fragmask_masks::{
    BlockLists, ListDirection, MaskError, MaskShape, PackedMask, TiledAccumulator,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A tensor as the Python wrapper hands it over: `(data_ptr, shape, strides in
/// elements, dtype name)`.
pub(crate) type Raw = (u64, Vec<usize>, Vec<usize>, String);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn registry() -> &'static Mutex<HashMap<u64, Arc<PackedMask>>> {
    static MASKS: OnceLock<Mutex<HashMap<u64, Arc<PackedMask>>>> = OnceLock::new();
    MASKS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers a packed mask; its id travels through the traceable op as an int.
pub(crate) fn register(mask: &Arc<PackedMask>) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, mask.clone());
    id
}

/// The ids registered by [`register_placeholder`].
fn placeholders() -> &'static Mutex<HashSet<u64>> {
    static IDS: OnceLock<Mutex<HashSet<u64>>> = OnceLock::new();
    IDS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Registers a GPU pack's host stand-in, its [`geometry`] (no tile): its lists are on the
/// device only, which the forward's plan is told (`AttentionOptions::mask_on_device_only`).
pub(crate) fn register_placeholder(mask: &Arc<PackedMask>) -> u64 {
    let id = register(mask);
    placeholders()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id);
    id
}

/// Whether `id` was registered by [`register_placeholder`].
pub(crate) fn is_placeholder(id: u64) -> bool {
    placeholders()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&id)
}

/// What was written on the device beside a mask's lists: by the GPU packer or transposer
/// beside lists it built (their partial-tile count and dispatch order), or by the Python
/// side beside host lists it copied there (their dispatch order alone, `partial_count` 0:
/// [`record_dispatch_order`]). `lists_at` is the address of the lists' first (the counts
/// per row); `tile_order` that of the dispatch order (the forward's row blocks, the
/// backward's key tiles), 0 for none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GpuBuilt {
    pub(crate) lists_at: u64,
    pub(crate) partial_count: u64,
    pub(crate) tile_order: u64,
}

/// [`GpuBuilt`] by registry id: one record per list set (a host mask's forward and
/// transposed lists share its id), each found by its `lists_at`.
fn gpu_built() -> &'static Mutex<HashMap<u64, Vec<GpuBuilt>>> {
    static BUILT: OnceLock<Mutex<HashMap<u64, Vec<GpuBuilt>>>> = OnceLock::new();
    BUILT.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Records what was written beside lists of registry entry `id`, as `built` says (beside
/// the records of the entry's other list sets; a record of the same lists is replaced).
pub(crate) fn record_gpu_built(id: u64, built: GpuBuilt) {
    let mut all = gpu_built().lock().unwrap_or_else(|e| e.into_inner());
    let records = all.entry(id).or_default();
    records.retain(|b| b.lists_at != built.lists_at);
    records.push(built);
}

/// Records that the dispatch order at device address `order_at` was copied beside host
/// lists of registry entry `mask_id` whose first list is at `lists_at` (the Python side's
/// copy of a host mask's lists and of `Packed.dispatch_order`; the caller keeps both
/// alive as long as the mask). A plan then runs that order without uploading it, which
/// makes a plan first made under CUDA-graph capture run largest first too.
#[pyfunction]
pub(crate) fn record_dispatch_order(mask_id: u64, lists_at: u64, order_at: u64) -> PyResult<()> {
    if mask_id == 0 || lists_at == 0 || order_at == 0 {
        return Err(PyValueError::new_err(
            "record_dispatch_order: a mask id and two device addresses",
        ));
    }
    record_gpu_built(
        mask_id,
        GpuBuilt {
            lists_at,
            partial_count: 0,
            tile_order: order_at,
        },
    );
    Ok(())
}

/// `lists` of registry entry `id` with what was recorded beside them ([`GpuBuilt`]): their
/// partial-tile count where the GPU built them (the plan then checks their density when the
/// kernel runs; docs/masks.md, "Dense tile lists") and their dispatch order
/// (`RawMaskLists::tile_order`); as they are otherwise.
pub(crate) fn with_gpu_built(id: u64, lists: RawMaskLists) -> RawMaskLists {
    let built = gpu_built().lock().unwrap_or_else(|e| e.into_inner());
    let record = built
        .get(&id)
        .and_then(|r| r.iter().find(|b| b.lists_at == lists.lists.num_blocks));
    match record {
        Some(b) => lists
            .with_partial_count(b.partial_count)
            .with_tile_order(b.tile_order),
        None => lists,
    }
}

/// Forgets a mask (its Python object was collected).
pub(crate) fn unregister(id: u64) {
    gpu_built()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
    placeholders()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
}

pub(crate) fn mask(id: u64) -> PyResult<Arc<PackedMask>> {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id)
        .cloned()
        .ok_or_else(|| {
            PyValueError::new_err(format!("fragmask.attention: no live mask with id {id}"))
        })
}

/// Per device: the device, the attention runner, the lightning kernels per (D, E, dtype).
pub(crate) struct Gpu {
    pub(crate) device: Device,
    pub(crate) attention: AttentionRunner,
    lightning: Mutex<HashMap<(usize, usize, ActDtype), Arc<LightningDecode>>>,
    packers: Mutex<HashMap<TileKey, Arc<GpuPacker>>>,
    /// The GPU packer's transposed-list kernels per (forward tile, backward accumulator).
    pub(crate) transposers: Mutex<HashMap<(TileKey, TileKey), Arc<GpuTransposer>>>,
    /// Events of finished or dropped GPU packs, for the next ones (creating an event
    /// costs a driver call per pack).
    pub(crate) events: Mutex<Vec<CudaEvent>>,
    /// The multiprocessor count, read once.
    sm_count: OnceLock<usize>,
}

impl Gpu {
    /// The device's multiprocessor count (read once; the split planners').
    pub(crate) fn sm_count(&self) -> PyResult<usize> {
        if let Some(&n) = self.sm_count.get() {
            return Ok(n);
        }
        let n = self
            .device
            .context()
            .attribute(
                fragmask_host::cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(|e| PyRuntimeError::new_err(format!("reading the multiprocessor count: {e}")))?;
        Ok(*self.sm_count.get_or_init(|| n.max(1) as usize))
    }
}

/// (block_m, block_n, warpgroups, swap_ab).
pub(crate) type TileKey = (u32, u32, u32, bool);

pub(crate) fn gpu(ordinal: usize) -> PyResult<Arc<Gpu>> {
    static GPUS: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
    let mut gpus = GPUS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(g) = gpus.get(&ordinal) {
        return Ok(g.clone());
    }
    let device = Device::open(ordinal).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let attention =
        AttentionRunner::new(&device).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let g = Arc::new(Gpu {
        device,
        attention,
        lightning: Mutex::new(HashMap::new()),
        packers: Mutex::new(HashMap::new()),
        transposers: Mutex::new(HashMap::new()),
        events: Mutex::new(Vec::new()),
        sm_count: OnceLock::new(),
    });
    gpus.insert(ordinal, g.clone());
    Ok(g)
}

fn lightning_kernels(
    g: &Gpu,
    d: usize,
    e: usize,
    dtype: ActDtype,
) -> PyResult<Arc<LightningDecode>> {
    let mut cache = g.lightning.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = cache.get(&(d, e, dtype)) {
        return Ok(k.clone());
    }
    let k = LightningDecode::new(&g.device, &Compiler::new(), d as u32, e as u32, dtype)
        .map(Arc::new)
        .map_err(|err| PyValueError::new_err(format!("fragmask.lightning_decode: {err}")))?;
    cache.insert((d, e, dtype), k.clone());
    Ok(k)
}

fn four(what: &str, v: &[usize]) -> PyResult<[usize; 4]> {
    <[usize; 4]>::try_from(v)
        .map_err(|_| PyValueError::new_err(format!("{what}: expected rank 4, got {v:?}")))
}

pub(crate) fn contiguous(t: &Raw) -> bool {
    let mut expect = 1;
    for (&d, &s) in t.1.iter().zip(&t.2).rev() {
        if d > 1 && s != expect {
            return false;
        }
        expect *= d;
    }
    true
}

/// A bf16 tensor as the attention wrappers pass it: `(data_ptr, shape, strides in
/// elements)`, rank 4.
pub(crate) type View = (u64, [usize; 4], [usize; 4]);

/// Refuses a mask packed for a tile or encoding the kernel does not read, before anything
/// is launched, with the host's message (it lists the supported tiles).
fn check_mask_layout(mask: &PackedMask) -> PyResult<()> {
    blockmask::mask_geometry(mask)
        .map(|_| ())
        .map_err(|e| PyValueError::new_err(format!("fragmask.attention: {e}")))
}

/// Everything that decides an attention forward's plan (the key of [`plans`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PlanKey {
    pub(crate) device: usize,
    pub(crate) q: ([usize; 4], [usize; 4]),
    pub(crate) k: ([usize; 4], [usize; 4]),
    pub(crate) v: ([usize; 4], [usize; 4]),
    pub(crate) mask_id: u64,
    pub(crate) lists: Option<[u64; 6]>,
    pub(crate) causal: bool,
    pub(crate) window: (i64, i64),
    /// The scale's f64 bits (`None`: `D ** -0.5`).
    pub(crate) scale: Option<u64>,
    pub(crate) bshd: bool,
    pub(crate) fp16: bool,
    /// 0: planned.
    pub(crate) splits: u32,
    /// O's element strides `[batch, head, row]` as `[B, H, Sq, D]` (`None`: contiguous, or
    /// `[B, Sq, H, D]` memory when `bshd`).
    pub(crate) out_strides: Option<[usize; 3]>,
}

impl PlanKey {
    /// The key of a call as the device API passes it (views' addresses not read).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        device: usize,
        q: &View,
        k: &View,
        v: &View,
        mask_id: u64,
        lists: Option<[u64; 6]>,
        causal: bool,
        window: (i64, i64),
        scale: Option<f64>,
        bshd: bool,
        fp16: bool,
        splits: u32,
    ) -> Self {
        PlanKey {
            device,
            q: (q.1, q.2),
            k: (k.1, k.2),
            v: (v.1, v.2),
            mask_id,
            lists,
            causal,
            window,
            scale: scale.map(f64::to_bits),
            bshd,
            fp16,
            splits,
            out_strides: None,
        }
    }

    /// The same call writing O through `out_strides` (`[batch, head, row]` of `[B, H, Sq, D]`).
    pub(crate) fn with_out_strides(self, out_strides: Option<[usize; 3]>) -> Self {
        Self {
            out_strides,
            ..self
        }
    }
}

/// Most plans the eager path keeps (a model has a few shapes; a key that recurs after
/// the cache was cleared is planned again).
const MAX_CACHED_PLANS: usize = 256;

/// The eager path's plans by call, made once per distinct call (a mask's id is never
/// reused, so a plan of a collected mask is never hit again).
fn plans() -> &'static Mutex<HashMap<PlanKey, Arc<AttentionPlan>>> {
    static PLANS: OnceLock<Mutex<HashMap<PlanKey, Arc<AttentionPlan>>>> = OnceLock::new();
    PLANS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The plan of `key`: the cached one, or made now and cached ([`plans`]). `stream`:
/// torch's current stream of the call, when there is one (see [`plan_attention`]).
pub(crate) fn cached_plan(
    g: &Gpu,
    key: &PlanKey,
    stream: Option<u64>,
) -> PyResult<Arc<AttentionPlan>> {
    let cached = plans()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .cloned();
    if let Some(p) = cached {
        return Ok(p);
    }
    let p = Arc::new(plan_attention(g, key, stream)?);
    let mut cache = plans().lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= MAX_CACHED_PLANS {
        cache.clear();
    }
    cache.insert(*key, p.clone());
    Ok(p)
}

/// The host's plan of a forward (every check, kernel choice, splits, tensor maps). A
/// mask with documents runs the documents grid, whose plan uploads its work-item table:
/// a first call made while `stream` is being captured into a CUDA graph plans the tile
/// lists instead (a copy of the mask without its documents), which upload nothing. So do
/// persistent CTAs (their work table): such a call runs one CTA per work tile.
fn plan_attention(g: &Gpu, key: &PlanKey, stream: Option<u64>) -> PyResult<AttentionPlan> {
    let raw = |(shape, strides): ([usize; 4], [usize; 4])| {
        if key.bshd {
            RawTensor {
                ptr: 0,
                shape: [shape[0], shape[2], shape[1], shape[3]],
                strides: [strides[0], strides[2], strides[1], strides[3]],
            }
        } else {
            RawTensor {
                ptr: 0,
                shape,
                strides,
            }
        }
    };
    let (qr, kr, vr) = (raw(key.q), raw(key.k), raw(key.v));
    // A bshd call's O is [B, Sq, H, D] memory, like its q (the caller's layout, no
    // transpose to copy); the host checks the strides.
    let [_, heads, rows, d] = qr.shape;
    let out_strides = if key.bshd {
        let row = heads.checked_mul(d);
        let batch = row.and_then(|r| r.checked_mul(rows));
        match (batch, row) {
            (Some(b), Some(r)) => Some([b, d, r]),
            _ => {
                return Err(PyValueError::new_err(
                    "fragmask.attention: the output's size overflows",
                ))
            }
        }
    } else {
        key.out_strides
    };
    // The default as the registered op's wrapper computes it (`D ** -0.5` in double),
    // so both paths launch with the same bits.
    let scale = key
        .scale
        .map_or_else(|| (qr.shape[3] as f64).powf(-0.5), f64::from_bits) as f32;
    if !scale.is_finite() || scale <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "fragmask.attention: scale {scale} must be positive and finite"
        )));
    }
    let bound = |x: i64, what: &str| -> PyResult<Option<u32>> {
        match x {
            -1 => Ok(None),
            x if x >= 0 => u32::try_from(x).map(Some).map_err(|_| {
                PyValueError::new_err(format!(
                    "fragmask.attention: window {what} {x} is too large"
                ))
            }),
            x => Err(PyValueError::new_err(format!(
                "fragmask.attention: window {what} {x}: expected -1 (unbounded) or >= 0"
            ))),
        }
    };
    let mut w = Window {
        left: bound(key.window.0, "left")?,
        right: bound(key.window.1, "right")?,
        diag_offset: 0,
    };
    if key.causal {
        w.right = Some(0);
    }
    let packed;
    let raw_mask = match (key.mask_id, key.lists) {
        (0, _) => RawMask::Window(w),
        (id, Some(ptrs)) => {
            if key.causal || w.left.is_some() || w.right.is_some() {
                return Err(PyValueError::new_err(
                    "fragmask.attention: causal / window cannot be combined with a Mask \
                     (build the mask with Mask.from_predicate instead)",
                ));
            }
            let registered = mask(id)?;
            check_mask_layout(&registered)?;
            packed = match stream {
                Some(s) if registered.documents().is_some() && capturing(g, s)? => {
                    let mut lists_only = (*registered).clone();
                    lists_only.drop_documents();
                    Arc::new(lists_only)
                }
                _ => registered,
            };
            RawMask::Blocks(&packed, with_gpu_built(id, RawMaskLists::from_array(ptrs)))
        }
        (_, None) => {
            return Err(PyValueError::new_err(
                "fragmask.attention: a mask id without the mask's lists",
            ))
        }
    };
    let capturing_now = match stream {
        Some(s) => capturing(g, s)?,
        None => false,
    };
    let order_on_device = matches!(raw_mask, RawMask::Blocks(_, lists) if lists.tile_order != 0);
    let opts = AttentionOptions {
        scale: Some(scale),
        dtype: key.fp16.then_some(ActDtype::F16),
        splits: (key.splits > 0).then_some(key.splits),
        persistent: capturing_now.then_some(false),
        // The shared-K/V tile's step table is uploaded at planning, which capture forbids.
        shared_kv: capturing_now.then_some(false),
        // So is a row order computed from host lists: under capture only the GPU packer's runs.
        tile_order: (capturing_now && !order_on_device).then_some(false),
        out_strides,
        mask_on_device_only: key.mask_id != 0 && is_placeholder(key.mask_id),
        ..AttentionOptions::default()
    };
    g.attention
        .plan(&qr, &kr, &vr, &raw_mask, &opts)
        .map_err(|e| PyValueError::new_err(format!("fragmask.attention: {e}")))
}

/// `fragmask::attention`'s launch, shared by the eager fast path and the torch.library
/// op. `q`, `k`, `v`: `[B, H, S, D]` views (`[B, S, H, D]` when `bshd`; any strides
/// with a unit-stride head dim). The wrappers check that all three are bfloat16 or
/// float16 CUDA tensors of `device` and allocate `out` (`[B, H, Sq, D]` in
/// `out_strides`, `[batch, head, row]` elements, contiguous when None; `[B, Sq, H, D]`
/// memory when `bshd`) and `lse` (contiguous f32 `[B, H, Sq]`); everything else is checked by the plan,
/// made once per distinct call and cached ([`plans`]). `mask_id` 0 means no mask;
/// otherwise `lists` are the device addresses of its six lists. `window` bounds are -1
/// for unbounded; `scale` None is `D ** -0.5`. `fp16`: q, k, v and out are float16.
/// A split-KV plan without a workspace takes one from `raw_alloc`, `(alloc, delete)`:
/// torch's caching-allocator functions (`alloc(bytes, stream) -> address`,
/// `delete(address)`), given back after the launches (stream-ordered); without them it
/// reports `(splits, o floats, lse floats)` and launches nothing (the wrapper allocates
/// the workspace with torch and calls again).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (q, k, v, out, lse, mask_id, lists, causal, window_left, window_right,
                    scale, bshd, stream, device, fp16=false, splits=0, ws_o=0, ws_lse=0,
                    raw_alloc=None, out_strides=None))]
pub(crate) fn attention_launch(
    q: View,
    k: View,
    v: View,
    out: u64,
    lse: u64,
    mask_id: u64,
    lists: Option<[u64; 6]>,
    causal: bool,
    window_left: i64,
    window_right: i64,
    scale: Option<f64>,
    bshd: bool,
    stream: u64,
    device: usize,
    fp16: bool,
    splits: u32,
    ws_o: u64,
    ws_lse: u64,
    raw_alloc: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>,
    out_strides: Option<[usize; 3]>,
) -> PyResult<Option<(u32, usize, usize)>> {
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
    )
    .with_out_strides(out_strides);
    let g = gpu(device)?;
    let plan = cached_plan(&g, &key, Some(stream))?;
    let ptrs = PlanPointers {
        q: q.0,
        k: k.0,
        v: v.0,
        o: out,
        lse,
        ws_o,
        ws_lse,
    };
    if plan.workspace_floats.0 > 0 && (ws_o == 0 || ws_lse == 0) {
        let (o, l) = plan.workspace_floats;
        let Some((alloc, delete)) = raw_alloc else {
            return Ok(Some((plan.splits, o, l)));
        };
        // One block: o's floats are a multiple of D (64 or more), so lse's part stays
        // 16-byte aligned.
        let bytes = o
            .checked_add(l)
            .and_then(|n| n.checked_mul(4))
            .ok_or_else(|| PyValueError::new_err("fragmask.attention: workspace overflows"))?;
        let block: u64 = alloc.call1((bytes, stream))?.extract()?;
        let ptrs = PlanPointers {
            ws_o: block,
            ws_lse: block + 4 * o as u64,
            ..ptrs
        };
        // SAFETY: as below; the workspace is a fresh block of the plan's floats from
        // torch's caching allocator on `stream`, given back after the launches are queued
        // (stream-ordered: later work on the stream reuses it only after them).
        let run = unsafe { launch_planned(&g, &plan, stream, &ptrs) };
        delete.call1((block,))?;
        return run.map(|()| None);
    }
    // SAFETY: the addresses are data_ptr() of live torch CUDA tensors of `device` with
    // the shapes and strides the plan was made for (the key); out and lse are fresh
    // outputs of the plan's sizes, ws_o / ws_lse fresh f32 tensors of the sizes the plan
    // reported (this function's contract with its wrappers, which the device API keeps
    // private to them).
    unsafe { launch_planned(&g, &plan, stream, &ptrs) }?;
    Ok(None)
}

/// Whether torch's `stream` of `g`'s device is being captured into a CUDA graph.
pub(crate) fn capturing(g: &Gpu, stream: u64) -> PyResult<bool> {
    // SAFETY: `stream` is torch's current stream of this device (the wrapper reads it).
    let cuda_stream = unsafe { g.device.borrowed_stream(stream) };
    let status = cuda_stream
        .capture_status()
        .map_err(|e| PyRuntimeError::new_err(format!("fragmask.attention: {e}")))?;
    Ok(status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Runs `plan` on torch's `stream` of the plan's device.
///
/// # Safety
/// `stream` is torch's current stream of the device of `g` (the wrappers read it with
/// torch), alive while torch runs this call; `ptrs` are [`AttentionPlan::run`]'s
/// contract.
unsafe fn launch_planned(
    g: &Gpu,
    plan: &AttentionPlan,
    stream: u64,
    ptrs: &PlanPointers,
) -> PyResult<()> {
    // SAFETY: this function's contract.
    let stream = unsafe { g.device.borrowed_stream(stream) };
    // SAFETY: this function's contract.
    unsafe { plan.run(&stream, ptrs) }
        .map_err(|e| PyValueError::new_err(format!("fragmask.attention: {e}")))
}

fn act(what: &str, t: &Raw) -> PyResult<ActDtype> {
    match t.3.as_str() {
        "bfloat16" => Ok(ActDtype::Bf16),
        "float16" => Ok(ActDtype::F16),
        "float32" => Ok(ActDtype::F32),
        other => Err(PyTypeError::new_err(format!(
            "fragmask.lightning_decode: {what} is {other}; expected bfloat16, float16 or float32"
        ))),
    }
}

/// The checked problem of a lightning decode call: contiguous q, k `[B, H, n, D]`, v and
/// out `[B, H, n, E]`, kv float32 `[B, H, D, E]`, slope float32 `[H]`.
fn lightning_problem(
    q: &Raw,
    k: &Raw,
    v: &Raw,
    kv: &Raw,
    slope: &Raw,
    out: &Raw,
) -> PyResult<LightningProblem> {
    let dtype = act("q", q)?;
    for (what, t) in [("k", k), ("v", v), ("out", out)] {
        if act(what, t)? != dtype {
            return Err(PyTypeError::new_err(format!(
                "fragmask.lightning_decode: {what} is {}, q is {}",
                t.3, q.3
            )));
        }
    }
    for (what, t) in [("kv", kv), ("slope", slope)] {
        if t.3 != "float32" {
            return Err(PyTypeError::new_err(format!(
                "fragmask.lightning_decode: {what} is {}; expected float32",
                t.3
            )));
        }
    }
    let [b, h, n, d] = four("q", &q.1)?;
    let e = four("v", &v.1)?[3];
    let problem = LightningProblem {
        batch: b,
        heads: h,
        tokens: n,
        dim_k: d,
        dim_v: e,
        dtype,
    }
    .validate()
    .map_err(|err| PyValueError::new_err(format!("fragmask.lightning_decode: q: {err}")))?;
    for (what, tensor, t) in [
        ("k", "k", k),
        ("v", "v", v),
        ("out", "o", out),
        ("kv", "state", kv),
    ] {
        problem.check_shape(tensor, &t.1).map_err(|err| {
            PyValueError::new_err(format!("fragmask.lightning_decode: {what}: {err}"))
        })?;
    }
    if slope.1.iter().product::<usize>() != h {
        return Err(PyValueError::new_err(format!(
            "fragmask.lightning_decode: slope has shape {:?}; expected [{h}] or [{h}, 1, 1]",
            slope.1
        )));
    }
    for (what, t) in [
        ("q", q),
        ("k", k),
        ("v", v),
        ("out", out),
        ("kv", kv),
        ("slope", slope),
    ] {
        if !contiguous(t) {
            return Err(PyValueError::new_err(format!(
                "fragmask.lightning_decode: {what} must be contiguous (call .contiguous())"
            )));
        }
    }
    Ok(problem)
}

/// `fragmask::lightning_decode`: contiguous q, k `[B, H, n, D]`, v and out
/// `[B, H, n, E]`, kv float32 `[B, H, D, E]` (updated in place), slope float32 `[H]`.
/// The slopes stay on the device, so they are not checked for finiteness here (that
/// would synchronise); a non-finite slope gives non-finite outputs.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn lightning_decode(
    q: Raw,
    k: Raw,
    v: Raw,
    kv: Raw,
    slope: Raw,
    out: Raw,
    stream: u64,
    device: usize,
) -> PyResult<()> {
    let plan = LightningPlanHandle::new(&q, &k, &v, &kv, &slope, &out, device)?;
    plan.run(q.0, k.0, v.0, out.0, kv.0, slope.0, stream)
}

/// A checked lightning decode call whose runs pass addresses only (the eager fast
/// path's, cached per shapes and dtypes by the wrapper).
#[pyclass(frozen, module = "fragmask._fragmask", name = "LightningPlanHandle")]
pub(crate) struct LightningPlanHandle {
    gpu: Arc<Gpu>,
    /// The checked problem's geometry, function and parameter block (a run patches the
    /// addresses); its function keeps the kernels' module loaded.
    plan: LightningPlan,
    /// Bytes of q, k, v, out, kv and slope (contiguous): a run checks that out meets no
    /// input from these and the addresses alone.
    bytes: [u64; 6],
}

/// Bytes of the contiguous q, k, v, out, kv and slope of `problem` (`None` when one
/// does not fit a `u64`, which `validate`'s bounds rule out).
fn lightning_bytes(problem: &LightningProblem) -> Option<[u64; 6]> {
    let elem: u64 = match problem.dtype {
        ActDtype::F32 => 4,
        _ => 2,
    };
    let (b, h, n, d, e) = (
        problem.batch as u64,
        problem.heads as u64,
        problem.tokens as u64,
        problem.dim_k as u64,
        problem.dim_v as u64,
    );
    let rows = b.checked_mul(h)?.checked_mul(n)?;
    let qk = rows.checked_mul(d)?.checked_mul(elem)?;
    let vo = rows.checked_mul(e)?.checked_mul(elem)?;
    let kv = b
        .checked_mul(h)?
        .checked_mul(d)?
        .checked_mul(e)?
        .checked_mul(4)?;
    Some([qk, qk, vo, vo, kv, h.checked_mul(4)?])
}

/// Whether `[a, a + a_len)` and `[b, b + b_len)` share a byte (lengths at least 1).
fn spans_meet(a: u64, a_len: u64, b: u64, b_len: u64) -> bool {
    a < b.saturating_add(b_len.max(1)) && b < a.saturating_add(a_len.max(1))
}

impl LightningPlanHandle {
    fn new(
        q: &Raw,
        k: &Raw,
        v: &Raw,
        kv: &Raw,
        slope: &Raw,
        out: &Raw,
        device: usize,
    ) -> PyResult<Self> {
        let problem = lightning_problem(q, k, v, kv, slope, out)?;
        let g = gpu(device)?;
        let kernels = lightning_kernels(&g, problem.dim_k, problem.dim_v, problem.dtype)?;
        let plan = kernels
            .plan(&problem, None)
            .map_err(|err| PyValueError::new_err(format!("fragmask.lightning_decode: {err}")))?;
        let bytes = lightning_bytes(&problem).ok_or_else(|| {
            PyValueError::new_err("fragmask.lightning_decode: the tensors' sizes overflow")
        })?;
        Ok(Self {
            gpu: g,
            plan,
            bytes,
        })
    }
}

/// Plans a lightning decode call from tensors described as `lightning_decode`'s (their
/// addresses are not read).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn lightning_plan(
    q: Raw,
    k: Raw,
    v: Raw,
    kv: Raw,
    slope: Raw,
    out: Raw,
    device: usize,
) -> PyResult<LightningPlanHandle> {
    LightningPlanHandle::new(&q, &k, &v, &kv, &slope, &out, device)
}

#[pymethods]
impl LightningPlanHandle {
    /// Launches on `stream` at the addresses of tensors with the plan's shapes, dtypes
    /// and contiguity (the wrapper checks them). `ValueError` when out shares memory
    /// with an input (the kernel reads them while it writes out): checked here from the
    /// addresses and the plan's sizes, so the wrapper reads nothing more for it.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        q: u64,
        k: u64,
        v: u64,
        out: u64,
        kv: u64,
        slope: u64,
        stream: u64,
    ) -> PyResult<()> {
        let [q_len, k_len, v_len, out_len, kv_len, slope_len] = self.bytes;
        if [
            (q, q_len),
            (k, k_len),
            (v, v_len),
            (kv, kv_len),
            (slope, slope_len),
        ]
        .iter()
        .any(|&(p, len)| spans_meet(out, out_len, p, len))
        {
            return Err(PyValueError::new_err(
                "fragmask.lightning_decode: out overlaps an input (the kernel reads the \
                 inputs while it writes out)",
            ));
        }
        // SAFETY: torch's current stream of the plan's device, read by the wrapper.
        let stream = unsafe { self.gpu.device.borrowed_stream(stream) };
        // SAFETY: data_ptr() of live contiguous torch CUDA tensors with the shapes the
        // plan checked (the wrapper's contract, kept private by the device API) on a
        // stream of the plan's device; kv is read and written in place (allowed); out
        // overlaps no input (the wrapper checks a caller's `out`).
        unsafe { self.plan.launch(&stream, [q, k, v, out, kv, kv, slope]) }
            .map_err(|err| PyValueError::new_err(format!("fragmask.lightning_decode: {err}")))
    }
}

/// Compiles and loads the kernels of `device` for attention at `head_dims`, lightning
/// at `lightning` (D, E, dtype name) and the GPU packer at `packer_tiles` (block_m,
/// block_n, warpgroups, swap_ab) ahead of time, so no later call compiles.
#[pyfunction]
#[pyo3(signature = (device, head_dims, lightning, packer_tiles=Vec::new()))]
pub(crate) fn warmup(
    device: usize,
    head_dims: Vec<usize>,
    lightning: Vec<(usize, usize, String)>,
    packer_tiles: Vec<TileKey>,
) -> PyResult<()> {
    let g = gpu(device)?;
    for d in head_dims {
        g.attention
            .warm_up(d, &AttentionOptions::default())
            .map_err(|e| PyValueError::new_err(format!("fragmask.warmup: {e}")))?;
    }
    for (d, e, dtype) in lightning {
        let dtype = ActDtype::parse(&dtype)
            .ok_or_else(|| PyValueError::new_err(format!("fragmask.warmup: dtype {dtype}")))?;
        lightning_kernels(&g, d, e, dtype)?;
    }
    for key in packer_tiles {
        packer(&g, key)?;
    }
    Ok(())
}

// The GPU packer on torch tensors --------------------------------------------------

/// The compiled packer of the tile `key` on `g` (compiled at first use or in `warmup`;
/// the tile is validated then, with the messages of every constructor's tile).
fn packer(g: &Gpu, key: TileKey) -> PyResult<Arc<GpuPacker>> {
    let mut cache = g.packers.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = cache.get(&key) {
        return Ok(p.clone());
    }
    let (bm, bn, wg, swap) = key;
    let tile = crate::tile(bm, bn, wg, swap, KERNEL_ENCODING.name(), 0)?;
    // Tiles the packer cannot generate are bad input; anything after that is the GPU's.
    fragmask_kernels::packer::PackerKernels::new(&tile.acc).map_err(|e| {
        PyValueError::new_err(format!("mask: the GPU packer cannot pack this tile: {e}"))
    })?;
    let p = GpuPacker::new(&g.device, &Compiler::new(), &tile.acc)
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("mask: the GPU packer: {e}")))?;
    cache.insert(key, p.clone());
    Ok(p)
}

/// The empty mask of `shape` and `acc` (no partial or full tile), shared by every GPU
/// pack of that geometry as its registry entry (see [`GpuPack`]).
pub(crate) fn geometry(shape: MaskShape, acc: &TiledAccumulator) -> PyResult<Arc<PackedMask>> {
    type Key = (usize, usize, usize, usize, TileKey);
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<PackedMask>>>> = OnceLock::new();
    let key = (
        shape.batch,
        shape.heads,
        shape.seqlen_q,
        shape.seqlen_k,
        (
            acc.block_m(),
            acc.block_n(),
            acc.warpgroups(),
            acc.swap_ab(),
        ),
    );
    let mut cache = CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(m) = cache.get(&key) {
        return Ok(m.clone());
    }
    let empty = PackedMask::geometry_only(acc, KERNEL_ENCODING, shape)
        .map(Arc::new)
        .map_err(|e| crate::raise("mask", e))?;
    if cache.len() >= 64 {
        cache.clear();
    }
    cache.insert(key, empty.clone());
    Ok(empty)
}

/// Rounds `n` up to a multiple of 16.
pub(crate) fn align16(n: usize) -> Option<usize> {
    n.checked_add(15).map(|x| x & !15)
}

/// Where each list of one direction's [`BlockLists`] lives in an i32 output buffer
/// (`GpuPack.sizes`, and the transposition's): counts, full counts (`rows` each),
/// indices, full indices, tile offsets (`tiles` each), the partial-tile count (1), then
/// the words from a 16-byte boundary.
pub(crate) fn list_offsets(rows: usize, tiles: usize) -> [usize; 7] {
    let count = 2 * rows + 3 * tiles;
    [
        0,
        rows,
        2 * rows,
        2 * rows + tiles,
        2 * rows + 2 * tiles,
        count,
        (count + 1).div_ceil(4) * 4,
    ]
}

/// The device addresses of the lists in an output buffer at `out` laid out by
/// [`list_offsets`] (0 where an address would overflow, which the launch refuses).
pub(crate) fn raw_lists(out: u64, offsets: &[usize; 7]) -> RawBlockLists {
    let at = |i: usize| out.checked_add(4 * offsets[i] as u64).unwrap_or(0);
    RawBlockLists {
        num_blocks: at(0),
        full_num_blocks: at(1),
        indices: at(2),
        full_indices: at(3),
        tile_offsets: at(4),
    }
}

/// The lists of `direction` (`rows` rows of `row_len`) from an output buffer read back
/// whole (`all`, laid out by [`list_offsets`]).
pub(crate) fn lists_from_buffer(
    all: &[i32],
    offsets: &[usize; 7],
    direction: ListDirection,
    rows: usize,
    row_len: usize,
) -> Result<BlockLists, String> {
    let part = |i: usize, n: usize| {
        all.get(offsets[i]..offsets[i] + n)
            .map(<[i32]>::to_vec)
            .ok_or_else(|| format!("the output buffer is too short for {rows} rows"))
    };
    let tiles = rows * row_len;
    let lists = [
        part(0, rows)?,
        part(2, tiles)?,
        part(1, rows)?,
        part(3, tiles)?,
        part(4, tiles)?,
    ];
    BlockLists::new(direction, rows, row_len, lists).map_err(|e| e.to_string())
}

/// `GpuPack.sizes`.
pub(crate) type Sizes = (usize, usize, usize, usize, usize, usize, usize, usize);

/// What a pack left on the device, until `finish`.
pub(crate) struct Enqueued {
    pub(crate) event: CudaEvent,
    pub(crate) out: u64,
}

/// An event for a pack or transposition on `g` (from the pool, else a new one).
pub(crate) fn take_event(g: &Gpu, what: &str) -> PyResult<CudaEvent> {
    let pooled = g.events.lock().unwrap_or_else(|e| e.into_inner()).pop();
    match pooled {
        Some(e) => Ok(e),
        None => g
            .device
            .context()
            .new_event(None)
            .map_err(|e| PyRuntimeError::new_err(format!("{what}: creating an event: {e}"))),
    }
}

/// Gives an event back to `g`'s pool (at most 32 kept).
pub(crate) fn return_event(g: &Gpu, event: CudaEvent) {
    let mut pool = g.events.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < 32 {
        pool.push(event);
    }
}

/// A dense mask packed on the GPU into buffers torch owns (`Mask.from_dense` on a CUDA
/// tensor): `gpu_pack_plan` validates the shape and tile and says how much memory the
/// buffers need; `enqueue` runs the GPU packer on torch's stream, with nothing copied
/// or synchronised; `finish` waits for it and reads the lists and words back into a
/// host `Packed` (for files, stats, decoding).
///
/// The attention op finds the mask by `registry_id`, whose registry entry is the empty
/// mask of the same shape and tile: a plan reads only a mask's geometry on the host
/// (shape, tile, encoding), and the lists it reads on the device are this pack's. Once
/// `finish` has read them back, the ops plan with its `Packed` instead (`Mask._packed`),
/// as with a host-packed mask: the host copy is this buffer's lists and words as they
/// are (`lists_from_buffer` copies the slices in place, `PackedMask::from_parts` only
/// validates them; nothing sorts or renumbers), so the tables a plan builds from it
/// (shared-K/V steps, paired key blocks) hold the tile offsets the device words are
/// indexed by.
#[pyclass(frozen, module = "fragmask._fragmask", name = "GpuPack")]
pub(crate) struct GpuPack {
    id: u64,
    shape: PackShape,
    mask_shape: MaskShape,
    gpu: Arc<Gpu>,
    packer: Arc<GpuPacker>,
    enqueued: Mutex<Option<Enqueued>>,
}

impl Drop for GpuPack {
    fn drop(&mut self) {
        unregister(self.id);
        let enqueued = self.enqueued.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = enqueued.take() {
            return_event(&self.gpu, e.event);
        }
    }
}

/// Plans a GPU pack of a dense CUDA mask of `dims` (`[Sq, Sk]`, `[H, Sq, Sk]` or
/// `[B, H, Sq, Sk]`, as `Mask.from_dense`) for the tile; compiles the packer of the tile
/// on `device` at first use.
#[pyfunction]
pub(crate) fn gpu_pack_plan(
    dims: Vec<usize>,
    block_m: u32,
    block_n: u32,
    warpgroups: u32,
    swap_ab: bool,
    device: usize,
) -> PyResult<GpuPack> {
    let (batch, heads, seqlen_q, seqlen_k) = match *dims {
        [q, k] => (1, 1, q, k),
        [h, q, k] => (1, h, q, k),
        [b, h, q, k] => (b, h, q, k),
        _ => {
            return Err(crate::raise(
                "mask",
                MaskError::BadRank {
                    what: "dense mask",
                    rank: dims.len(),
                    expected: "2 ([Sq, Sk]), 3 ([H, Sq, Sk]) or 4 ([B, H, Sq, Sk])",
                },
            ))
        }
    };
    let mask_shape =
        MaskShape::new(batch, heads, seqlen_q, seqlen_k).map_err(|e| crate::raise("mask", e))?;
    let planes = batch
        .checked_mul(heads)
        .ok_or_else(|| PyValueError::new_err(format!("mask: {batch} x {heads} planes overflow")))?;
    let gpu = gpu(device)?;
    let packer = packer(&gpu, (block_m, block_n, warpgroups, swap_ab))?;
    let shape = packer
        .shape(planes, seqlen_q, seqlen_k)
        .map_err(|e| PyValueError::new_err(format!("mask: {e}")))?;
    shape
        .tiles()
        .checked_mul(packer.words_per_tile())
        .and_then(|w| w.checked_mul(8))
        .and_then(|b| b.checked_add(shape.dense_bytes()))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| PyValueError::new_err(format!("mask: {dims:?} is too large")))?;
    let id = register_placeholder(&geometry(mask_shape, packer.accumulator())?);
    Ok(GpuPack {
        id,
        shape,
        mask_shape,
        gpu,
        packer,
        enqueued: Mutex::new(None),
    })
}

impl GpuPack {
    /// (scratch, classes, partial_source) offsets in the workspace and its bytes.
    fn workspace(&self) -> PyResult<(usize, usize, usize, usize)> {
        let tiles = self.shape.tiles();
        let too_large = || PyValueError::new_err("mask: the packer workspace is too large");
        let classes = tiles
            .checked_mul(self.packer.words_per_tile())
            .and_then(|w| w.checked_mul(4))
            .and_then(align16)
            .ok_or_else(too_large)?;
        let source = classes
            .checked_add(tiles)
            .and_then(align16)
            .ok_or_else(too_large)?;
        let end = source
            .checked_add(4 * tiles)
            .and_then(align16)
            .ok_or_else(too_large)?;
        Ok((0, classes, source, end.max(16)))
    }

    /// The i32 entry of the output buffer where the row order starts: after the lists, the
    /// count and the words.
    fn order_at(&self) -> usize {
        let (rows, tiles) = (self.shape.rows(), self.shape.tiles());
        list_offsets(rows, tiles)[6] + (tiles * self.packer.words_per_tile()).max(4)
    }

    /// i32 entries of the output buffer: the lists, the count, the words, the row blocks'
    /// dispatch order.
    fn out_ints(&self) -> usize {
        self.order_at() + self.shape.rows()
    }
}

#[pymethods]
impl GpuPack {
    /// The key the attention op finds this mask by.
    #[getter]
    fn registry_id(&self) -> u64 {
        self.id
    }

    /// (B, H, Sq, Sk).
    #[getter]
    fn shape(&self) -> (usize, usize, usize, usize) {
        let s = self.mask_shape;
        (s.batch, s.heads, s.seqlen_q, s.seqlen_k)
    }

    /// (block_m, block_n, warpgroups, swap_ab).
    #[getter]
    fn tile(&self) -> TileKey {
        let a = self.packer.accumulator();
        (a.block_m(), a.block_n(), a.warpgroups(), a.swap_ab())
    }

    /// (rows, tiles, words_per_tile, workspace_bytes, out_ints, words_at, m_blocks,
    /// n_blocks): the buffers are a u8 workspace of `workspace_bytes` and an i32 output
    /// of `out_ints` entries (both from torch: 16-byte aligned) holding the lists at
    /// the offsets `list_offsets` gives, the words from entry `words_at` on, and last the
    /// row blocks' dispatch order (`rows` entries).
    #[getter]
    fn sizes(&self) -> PyResult<Sizes> {
        let s = self.shape;
        Ok((
            s.rows(),
            s.tiles(),
            self.packer.words_per_tile(),
            self.workspace()?.3,
            self.out_ints(),
            list_offsets(s.rows(), s.tiles())[6],
            s.m_blocks,
            s.n_blocks,
        ))
    }

    /// Enqueues the packer on `stream` (torch's current stream of the plan's device):
    /// `dense` holds `dense_len` bytes `[planes][Sq][Sk]` (nonzero = keep); the buffers
    /// are sized by `sizes`. Once only.
    fn enqueue(
        &self,
        dense: u64,
        dense_len: usize,
        workspace: u64,
        out: u64,
        stream: u64,
    ) -> PyResult<()> {
        let mut enqueued = self.enqueued.lock().unwrap_or_else(|e| e.into_inner());
        if enqueued.is_some() {
            return Err(PyValueError::new_err(
                "mask: this pack was enqueued already",
            ));
        }
        let (scratch, classes, source, _) = self.workspace()?;
        let (rows, tiles) = (self.shape.rows(), self.shape.tiles());
        let at = |base: u64, bytes: usize| base.checked_add(bytes as u64).unwrap_or(0);
        let offsets = list_offsets(rows, tiles);
        let l = offsets.map(|i| at(out, 4 * i));
        let raw = RawPackBuffers {
            scratch: at(workspace, scratch),
            classes: at(workspace, classes),
            partial_source: at(workspace, source),
            lists: raw_lists(out, &offsets),
            partial_count: l[5],
            row_order: at(out, 4 * self.order_at()),
            words: l[6],
        };
        let g = &self.gpu;
        // SAFETY: torch's current stream of this device (the wrapper reads it with torch).
        let stream = unsafe { g.device.borrowed_stream(stream) };
        // SAFETY: data_ptr() of a live contiguous CUDA tensor of `dense_len` bytes and of
        // two fresh torch allocations sized by `sizes` (16-byte aligned: torch's blocks
        // are 512-byte aligned), which the wrapper keeps until `finish` or this object
        // is dropped; enqueue_raw checks lengths, alignment and the shape again.
        unsafe {
            self.packer
                .enqueue_raw(&stream, dense, dense_len, self.shape, &raw)
        }
        .map_err(|e| PyValueError::new_err(format!("mask: {e}")))?;
        let event = take_event(g, "mask")?;
        event
            .record(&stream)
            .map_err(|e| PyRuntimeError::new_err(format!("mask: recording an event: {e}")))?;
        *enqueued = Some(Enqueued { event, out });
        record_gpu_built(
            self.id,
            GpuBuilt {
                lists_at: raw.lists.num_blocks,
                partial_count: raw.partial_count,
                tile_order: raw.row_order,
            },
        );
        Ok(())
    }

    /// Waits for the pack and reads it back: the lists and the partial tiles' words,
    /// validated as a file's are (GIL released while waiting and copying).
    fn finish(&self, py: Python<'_>) -> PyResult<crate::Packed> {
        let enqueued = self.enqueued.lock().unwrap_or_else(|e| e.into_inner());
        let Some(e) = enqueued.as_ref() else {
            return Err(PyValueError::new_err("mask: this pack was not enqueued"));
        };
        let (rows, tiles) = (self.shape.rows(), self.shape.tiles());
        let wpt = self.packer.words_per_tile();
        let offsets = list_offsets(rows, tiles);
        let read = || -> Result<PackedMask, String> {
            e.event
                .synchronize()
                .map_err(|err| format!("waiting for the packer: {err}"))?;
            let mut all = vec![0i32; offsets[5] + 1];
            // SAFETY: `out` addresses the i32 output buffer of at least `offsets[5] + 1`
            // entries (the wrapper keeps it alive), complete after the event; the
            // context is current on this thread (the event's synchronize bound it).
            unsafe { driver::memcpy_dtoh_sync(&mut all, e.out) }
                .map_err(|err| format!("reading the packed lists: {err}"))?;
            let count = usize::try_from(all[offsets[5]])
                .ok()
                .filter(|&c| c <= tiles)
                .ok_or_else(|| format!("partial tile count {}", all[offsets[5]]))?;
            let mut words = vec![0u32; count * wpt];
            // SAFETY: the words hold `tiles * wpt >= count * wpt` u32 from entry
            // `offsets[6]` of the same buffer (`sizes`).
            unsafe { driver::memcpy_dtoh_sync(&mut words, e.out + 4 * offsets[6] as u64) }
                .map_err(|err| format!("reading the packed words: {err}"))?;
            let lists = lists_from_buffer(
                &all,
                &offsets,
                ListDirection::Forward,
                rows,
                self.shape.n_blocks,
            )?;
            PackedMask::from_parts(
                self.packer.accumulator(),
                KERNEL_ENCODING,
                self.mask_shape,
                lists,
                words,
            )
            .map_err(|err| format!("the GPU packer's output: {err}"))
        };
        let packed = py
            .detach(read)
            .map_err(|m| PyRuntimeError::new_err(format!("mask: {m}")))?;
        Ok(crate::Packed::new(packed))
    }
}
