//! The GPU ops: launches on tensors torch owns, on torch's current stream, in the
//! primary context torch and cudarc share. Nothing here allocates device memory,
//! synchronises the host or prints; compilation happens at the first call of a
//! configuration or in `warmup` (so CUDA-graph capture never compiles).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use fragmask_host::attention::{AttentionOptions, AttentionRunner, RawMask, RawTensor, Window};
use fragmask_host::lightning::LightningDecode;
use fragmask_host::{Compiler, Device};
use fragmask_kernels::family::dtype::ActDtype;
use fragmask_kernels::lightning::LightningProblem;
use fragmask_masks::PackedMask;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A tensor as the Python wrapper hands it over: `(data_ptr, shape, strides in
/// elements, dtype name)`.
type Raw = (u64, Vec<usize>, Vec<usize>, String);

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

/// Forgets a mask (its Python object was collected).
pub(crate) fn unregister(id: u64) {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
}

fn mask(id: u64) -> PyResult<Arc<PackedMask>> {
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
struct Gpu {
    device: Device,
    attention: AttentionRunner,
    lightning: Mutex<HashMap<(usize, usize, ActDtype), Arc<LightningDecode>>>,
}

fn gpu(ordinal: usize) -> PyResult<Arc<Gpu>> {
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

fn raw_tensor(what: &str, t: &Raw) -> PyResult<RawTensor> {
    if t.3 != "bfloat16" {
        return Err(PyTypeError::new_err(format!(
            "fragmask.attention: {what} is {}; the attention kernel takes bfloat16",
            t.3
        )));
    }
    Ok(RawTensor {
        ptr: t.0,
        shape: four(what, &t.1)?,
        strides: four(what, &t.2)?,
    })
}

fn contiguous(t: &Raw) -> bool {
    let mut expect = 1;
    for (&d, &s) in t.1.iter().zip(&t.2).rev() {
        if d > 1 && s != expect {
            return false;
        }
        expect *= d;
    }
    true
}

/// `fragmask::attention` on `[B, H, S, D]` views (any strides with a unit-stride head
/// dim): `out` contiguous bf16 `[B, H, Sq, D]`, `lse` contiguous f32 `[B, H, Sq]`.
/// `lists` are the mask's six device tensors and `mask_id` its registry key (None: no
/// mask); `window` is (left, right), -1 unbounded.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (q, k, v, out, lse, lists, mask_id, causal, window, scale, stream, device))]
pub(crate) fn attention_forward(
    q: Raw,
    k: Raw,
    v: Raw,
    out: Raw,
    lse: Raw,
    lists: Option<Vec<Raw>>,
    mask_id: Option<u64>,
    causal: bool,
    window: (i64, i64),
    scale: f32,
    stream: u64,
    device: usize,
) -> PyResult<()> {
    let (qr, kr, vr) = (
        raw_tensor("q", &q)?,
        raw_tensor("k", &k)?,
        raw_tensor("v", &v)?,
    );
    let q_shape = qr.shape;
    if out.1 != q_shape || !contiguous(&out) || out.3 != "bfloat16" {
        return Err(PyValueError::new_err(format!(
            "fragmask.attention: out must be a contiguous bfloat16 {q_shape:?}"
        )));
    }
    let lse_shape = vec![q_shape[0], q_shape[1], q_shape[2]];
    if lse.1 != lse_shape || !contiguous(&lse) || lse.3 != "float32" {
        return Err(PyValueError::new_err(format!(
            "fragmask.attention: lse must be a contiguous float32 {lse_shape:?}"
        )));
    }
    if !scale.is_finite() || scale <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "fragmask.attention: scale {scale} must be positive and finite"
        )));
    }
    let bound = |x: i64, what: &str| -> PyResult<Option<u32>> {
        match x {
            -1 => Ok(None),
            x if x >= 0 => u32::try_from(x)
                .map(Some)
                .map_err(|_| PyValueError::new_err(format!("window {what} {x} is too large"))),
            x => Err(PyValueError::new_err(format!(
                "window {what} {x}: expected -1 (unbounded) or >= 0"
            ))),
        }
    };
    let mut w = Window {
        left: bound(window.0, "left")?,
        right: bound(window.1, "right")?,
        diag_offset: 0,
    };
    if causal {
        w.right = Some(0);
    }
    let packed;
    let raw_mask = match (lists, mask_id) {
        (None, _) => RawMask::Window(w),
        (Some(lists), Some(id)) => {
            if causal || w.left.is_some() || w.right.is_some() {
                return Err(PyValueError::new_err(
                    "fragmask.attention: causal / window cannot be combined with a Mask \
                     (build the mask with Mask.from_predicate instead)",
                ));
            }
            let ptrs: [u64; 6] = lists
                .iter()
                .map(|t| t.0)
                .collect::<Vec<_>>()
                .try_into()
                .map_err(|_| PyValueError::new_err("fragmask.attention: a mask has six lists"))?;
            packed = mask(id)?;
            RawMask::Blocks(&packed, ptrs)
        }
        (Some(_), None) => {
            return Err(PyValueError::new_err(
                "fragmask.attention: mask lists without a mask id",
            ))
        }
    };
    let g = gpu(device)?;
    // SAFETY: `stream` is torch's current stream of `device` (the wrapper reads
    // torch.cuda.current_stream(device).cuda_stream), alive while torch runs this op.
    let stream = unsafe { g.device.borrowed_stream(stream) };
    let opts = AttentionOptions {
        scale: Some(scale),
        ..AttentionOptions::default()
    };
    // SAFETY: the addresses are data_ptr() of live torch CUDA tensors of `device` whose
    // shapes and strides came with them (torch keeps them alive until the op returns and
    // its caching allocator orders reuse on this stream); out and lse are fresh outputs.
    unsafe {
        g.attention
            .launch_raw(&stream, &qr, &kr, &vr, &raw_mask, &opts, out.0, lse.0)
    }
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
    let dtype = act("q", &q)?;
    for (what, t) in [("k", &k), ("v", &v), ("out", &out)] {
        if act(what, t)? != dtype {
            return Err(PyTypeError::new_err(format!(
                "fragmask.lightning_decode: {what} is {}, q is {}",
                t.3, q.3
            )));
        }
    }
    for (what, t) in [("kv", &kv), ("slope", &slope)] {
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
        ("k", "k", &k),
        ("v", "v", &v),
        ("out", "o", &out),
        ("kv", "state", &kv),
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
        ("q", &q),
        ("k", &k),
        ("v", &v),
        ("out", &out),
        ("kv", &kv),
        ("slope", &slope),
    ] {
        if !contiguous(t) {
            return Err(PyValueError::new_err(format!(
                "fragmask.lightning_decode: {what} must be contiguous (call .contiguous())"
            )));
        }
    }
    let g = gpu(device)?;
    let kernels = lightning_kernels(&g, d, e, dtype)?;
    // SAFETY: as in attention_forward: torch's current stream of `device`.
    let stream = unsafe { g.device.borrowed_stream(stream) };
    let decode = kernels.with_stream(stream);
    // SAFETY: data_ptr() of live contiguous torch CUDA tensors whose shapes were checked
    // against `problem` above; kv is read and written in place (allowed); out is fresh.
    unsafe { decode.launch_raw(&problem, [q.0, k.0, v.0, out.0, kv.0, kv.0, slope.0], None) }
        .map_err(|err| PyValueError::new_err(format!("fragmask.lightning_decode: {err}")))
}

/// Compiles and loads the kernels of `device` for attention at `head_dims` and lightning
/// at `lightning` (D, E, dtype name) ahead of time, so no later call compiles.
#[pyfunction]
#[pyo3(signature = (device, head_dims, lightning))]
pub(crate) fn warmup(
    device: usize,
    head_dims: Vec<usize>,
    lightning: Vec<(usize, usize, String)>,
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
    Ok(())
}
