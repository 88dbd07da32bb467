//! `fragmask.decode`: split-KV decode (fragmask_host::decode) on tensors torch owns, on
//! torch's current stream. [`decode_plan`] runs on the CPU (no GPU): it validates the
//! shapes with the host's typed checks and returns the split count, the workspace and
//! the lse shape, so that the Python op allocates every output and the workspace
//! through torch; [`decode_launch`] checks the same again against the tensors and
//! launches. Nothing here allocates device memory, synchronises or prints (CUDA-graph
//! safe once the kernels are compiled: `fragmask.warmup` or a first eager call).
//!
//! Device-resident block tables, lengths and `cu_seqlens_q` are not read on the host
//! (that would synchronise): the kernel clamps block table entries to the pool, lengths
//! to the capacity and query offsets to the rows of q, so bad values there give wrong
//! rows, never out-of-bounds accesses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fragmask_host::decode::{
    CacheShape, DecodeMask, DecodePlan, DecodePointers, DecodeRunner, DecodeShape,
};
use fragmask_host::Compiler;
use fragmask_kernels::decode::DecodeConfig;
use fragmask_kernels::family::dtype::ActDtype;
use fragmask_masks::PackedMask;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::gpu::{contiguous, gpu, Raw};

const WHAT: &str = "fragmask.decode";

pub(crate) fn err(message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{WHAT}: {message}"))
}

fn dtype_of(what: &str, name: &str) -> PyResult<ActDtype> {
    match name {
        "bfloat16" => Ok(ActDtype::Bf16),
        "float16" => Ok(ActDtype::F16),
        other => Err(PyTypeError::new_err(format!(
            "{WHAT}: {what} is {other}; decode takes bfloat16 or float16"
        ))),
    }
}

fn dims<const N: usize>(what: &str, v: &[usize], layout: &str) -> PyResult<[usize; N]> {
    <[usize; N]>::try_from(v).map_err(|_| err(format!("{what} has shape {v:?}; expected {layout}")))
}

/// What the Python wrapper passes about one call (shapes and dtype names, no pointers).
struct Call<'a> {
    q: &'a [usize],
    k: &'a [usize],
    v: &'a [usize],
    dtypes: [&'a str; 3],
    block_table: Option<&'a [usize]>,
    seqlens_k: Option<&'a [usize]>,
    cu_seqlens_q: Option<&'a [usize]>,
    max_seqlen_q: usize,
    window: (i64, i64),
    scale: f64,
    /// The mask's key in [`masks`] (0: none).
    mask_id: u64,
    /// The caches are head-major `[B, Hkv, Sk, D]` (the attention entry point's decode
    /// shapes in the `[B, H, S, D]` layout).
    head_major: bool,
}

/// Block-sparse masks in decode's form ([`DecodeMask`]), by the Python Mask's registry
/// id: converted once ([`decode_mask_prepare`]), dropped with the Mask
/// ([`decode_mask_release`], a weakref finalizer).
fn masks() -> &'static Mutex<HashMap<u64, Arc<DecodeMask>>> {
    static MASKS: OnceLock<Mutex<HashMap<u64, Arc<DecodeMask>>>> = OnceLock::new();
    MASKS.get_or_init(|| Mutex::new(HashMap::new()))
}

fn mask_of(id: u64) -> PyResult<Arc<DecodeMask>> {
    masks()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&id)
        .cloned()
        .ok_or_else(|| err(format!("mask {id} was not prepared for decode (internal)")))
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Converts a packed mask (its safetensors bytes, `Mask.to_bytes()`) to decode's form
/// once, keeps it under `id` (the Mask's registry id) for the planner, and returns its
/// device arrays as little-endian int32 bytes: the `(key block, partial or -1)` list
/// pairs, the counts, and the partial blocks' row-major bits (one word when none).
#[pyfunction]
pub(crate) fn decode_mask_prepare(
    py: Python<'_>,
    id: u64,
    data: &[u8],
) -> PyResult<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let mask = py
        .detach(|| {
            let packed = PackedMask::from_safetensors(data).map_err(|e| e.to_string())?;
            DecodeMask::from_packed(&packed).map_err(|e| e.to_string())
        })
        .map_err(err)?;
    let bits: Vec<i32> = if mask.bits.is_empty() {
        vec![0]
    } else {
        mask.bits.iter().map(|&w| w as i32).collect()
    };
    let out = (
        i32_bytes(&mask.list),
        i32_bytes(&mask.count),
        i32_bytes(&bits),
    );
    masks()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, Arc::new(mask));
    Ok(out)
}

/// Forgets the decode form of mask `id` (its Mask was collected).
#[pyfunction]
pub(crate) fn decode_mask_release(id: u64) {
    masks()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id);
}

/// The host's shape and plan of a call (typed checks, no GPU).
fn plan_of(c: &Call<'_>, multiprocessors: usize, splits: usize) -> PyResult<DecodePlan> {
    let dtype = dtype_of("q", c.dtypes[0])?;
    for (what, name) in [("k_cache", c.dtypes[1]), ("v_cache", c.dtypes[2])] {
        if dtype_of(what, name)? != dtype {
            return Err(PyTypeError::new_err(format!(
                "{WHAT}: {what} is {name}, q is {}",
                c.dtypes[0]
            )));
        }
    }
    if c.k != c.v {
        return Err(err(format!(
            "v_cache has shape {:?}, k_cache {:?}; they must match",
            c.v, c.k
        )));
    }
    let [k0, k1, kv_heads, kd] = if c.head_major {
        let [b, hkv, sk, d] = dims::<4>("k", c.k, "[B, Hkv, Sk, D]")?;
        [b, sk, hkv, d]
    } else {
        dims::<4>(
            "k_cache",
            c.k,
            "[B, Sk, Hkv, D] or [pages, page_size, Hkv, D]",
        )?
    };
    // q: [B, Sq, H, D], or [total_q, H, D] with cu_seqlens_q.
    let (batch, seqlen_q, heads, d, total_q) = match c.cu_seqlens_q {
        None => {
            let [b, sq, h, d] = dims::<4>(
                "q",
                c.q,
                "[B, Sq, H, D] (or [total_q, H, D] with cu_seqlens_q)",
            )?;
            (b, sq, h, d, None)
        }
        Some(cu) => {
            let [total, h, d] = dims::<3>("q", c.q, "[total_q, H, D] with cu_seqlens_q")?;
            let [n] = dims::<1>("cu_seqlens_q", cu, "[B + 1]")?;
            if n < 2 {
                return Err(err(format!(
                    "cu_seqlens_q has {n} entries; expected B + 1 >= 2"
                )));
            }
            if c.max_seqlen_q == 0 {
                return Err(err("max_seqlen_q must be given (>= 1) with cu_seqlens_q"));
            }
            (n - 1, c.max_seqlen_q, h, d, Some(total))
        }
    };
    if kd != d {
        return Err(err(format!("k_cache has head size {kd}, q {d}")));
    }
    let cache = match c.block_table {
        None => {
            if k0 != batch {
                return Err(err(format!(
                    "k_cache holds {k0} requests, q {batch} (a paged cache needs block_table)"
                )));
            }
            if c.head_major {
                CacheShape::HeadMajor { capacity: k1 }
            } else {
                CacheShape::Contiguous { capacity: k1 }
            }
        }
        Some(_) if c.head_major => {
            return Err(err("a head-major cache is not paged"));
        }
        Some(t) => {
            let [tb, max_pages] = dims::<2>("block_table", t, "[B, max_pages]")?;
            if tb != batch {
                return Err(err(format!(
                    "block_table has {tb} rows, q {batch} requests"
                )));
            }
            CacheShape::Paged {
                page_size: k1,
                num_pages: k0,
                max_pages,
            }
        }
    };
    if let Some(l) = c.seqlens_k {
        if l != [batch] {
            return Err(err(format!(
                "seqlens_k has shape {l:?}; expected [{batch}]"
            )));
        }
    }
    let window = |w: i64, what: &str| -> PyResult<Option<usize>> {
        match w {
            -1 => Ok(None),
            w if w >= 0 => Ok(Some(w as usize)),
            w => Err(err(format!("{what} = {w}; expected -1 (none) or >= 0"))),
        }
    };
    let shape = DecodeShape {
        batch,
        seqlen_q,
        heads,
        kv_heads,
        head_dim: d,
        dtype,
        cache,
        window_left: window(c.window.0, "window left")?,
        window_right: window(c.window.1, "window right")?,
        softmax_scale: (c.scale > 0.0).then_some(c.scale),
    };
    let shape = shape.validate().map_err(err)?;
    if c.scale.is_nan() || c.scale.is_infinite() {
        return Err(err(format!("scale {} is not finite", c.scale)));
    }
    let capacity = shape.cache.capacity();
    let splits = (splits > 0).then_some(splits);
    let plan = if c.mask_id != 0 {
        DecodePlan::for_mask(shape, &*mask_of(c.mask_id)?, multiprocessors, splits)
    } else {
        DecodePlan::new(shape, capacity, multiprocessors, splits)
    }
    .map_err(err)?;
    match total_q {
        Some(t) => plan.with_varlen(t).map_err(err),
        None => Ok(plan),
    }
}

/// `(num_splits, workspace o floats, workspace lse floats, lse shape)` of a call, from
/// shapes only (CPU; the Python op allocates the outputs and workspace from it).
#[pyfunction]
#[pyo3(signature = (q, k, v, dtypes, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, window_left, window_right, scale, splits, multiprocessors, mask_id=0, head_major=false))]
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
    multiprocessors: usize,
    mask_id: u64,
    head_major: bool,
) -> PyResult<(usize, usize, usize, Vec<usize>)> {
    let call = Call {
        q: &q,
        k: &k,
        v: &v,
        dtypes: [&dtypes.0, &dtypes.1, &dtypes.2],
        block_table: block_table.as_deref(),
        seqlens_k: seqlens_k.as_deref(),
        cu_seqlens_q: cu_seqlens_q.as_deref(),
        max_seqlen_q,
        window: (window_left, window_right),
        scale,
        mask_id,
        head_major,
    };
    let plan = plan_of(&call, multiprocessors.max(1), splits)?;
    let (o, lse) = plan.workspace_floats().map_err(err)?;
    Ok((plan.num_splits, o, lse, lse_shape(&plan)))
}

/// The lse's shape of `plan`: `[H, total_q]` for varlen queries, else `[B, H, Sq]`.
pub(crate) fn lse_shape(plan: &DecodePlan) -> Vec<usize> {
    let s = plan.shape;
    match plan.total_q {
        Some(t) => vec![s.heads, t],
        None => vec![s.batch, s.heads, s.seqlen_q],
    }
}

/// The host's plan of a call described by shapes and dtype names (`decode_plan`'s
/// checks), for the plan objects.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_from_shapes(
    q: &[usize],
    k: &[usize],
    v: &[usize],
    dtypes: [&str; 3],
    block_table: Option<&[usize]>,
    seqlens_k: Option<&[usize]>,
    cu_seqlens_q: Option<&[usize]>,
    max_seqlen_q: usize,
    window: (i64, i64),
    scale: f64,
    mask_id: u64,
    multiprocessors: usize,
    splits: usize,
    head_major: bool,
) -> PyResult<DecodePlan> {
    let call = Call {
        q,
        k,
        v,
        dtypes,
        block_table,
        seqlens_k,
        cu_seqlens_q,
        max_seqlen_q,
        window,
        scale,
        mask_id,
        head_major,
    };
    plan_of(&call, multiprocessors.max(1), splits)
}

/// Compiled runners per (device ordinal, geometry).
type Runners = Mutex<HashMap<(usize, DecodeConfig), Arc<DecodeRunner>>>;

pub(crate) fn runner(device: usize, config: DecodeConfig) -> PyResult<Arc<DecodeRunner>> {
    static RUNNERS: OnceLock<Runners> = OnceLock::new();
    let mut map = RUNNERS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(r) = map.get(&(device, config)) {
        return Ok(r.clone());
    }
    let g = gpu(device)?;
    let r = Arc::new(DecodeRunner::new(&g.device, &Compiler::new(), config).map_err(err)?);
    map.insert((device, config), r.clone());
    Ok(r)
}

/// Launches one decode call on torch's `stream` of `device`: q, caches, out, lse and the
/// workspace are torch tensors (contiguous; checked against the plan); `splits` is the
/// count [`decode_plan`] returned.
#[pyfunction]
#[pyo3(signature = (q, k, v, out, lse, block_table, seqlens_k, cu_seqlens_q, max_seqlen_q, window_left, window_right, scale, splits, ws_o, ws_lse, stream, device, mask_id=0, mask=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_launch(
    q: Raw,
    k: Raw,
    v: Raw,
    out: Raw,
    lse: Raw,
    block_table: Option<Raw>,
    seqlens_k: Option<Raw>,
    cu_seqlens_q: Option<Raw>,
    max_seqlen_q: usize,
    window_left: i64,
    window_right: i64,
    scale: f64,
    splits: usize,
    ws_o: Raw,
    ws_lse: Raw,
    stream: u64,
    device: usize,
    mask_id: u64,
    mask: Option<(Raw, Raw, Raw)>,
) -> PyResult<()> {
    let call = Call {
        q: &q.1,
        k: &k.1,
        v: &v.1,
        dtypes: [&q.3, &k.3, &v.3],
        block_table: block_table.as_ref().map(|t| t.1.as_slice()),
        seqlens_k: seqlens_k.as_ref().map(|t| t.1.as_slice()),
        cu_seqlens_q: cu_seqlens_q.as_ref().map(|t| t.1.as_slice()),
        max_seqlen_q,
        window: (window_left, window_right),
        scale,
        mask_id,
        head_major: false,
    };
    let g = gpu(device)?;
    let plan = plan_of(&call, 1, splits.max(1))?;
    // The mask's device arrays: int32, contiguous, at least the decode form's lengths.
    let mask_ptrs = match (mask_id, &mask) {
        (0, None) => (0, 0, 0),
        (id, Some((list, count, bits))) if id != 0 => {
            let m = mask_of(id)?;
            for (what, t, n) in [
                ("mask list", list, m.list.len()),
                ("mask counts", count, m.count.len()),
                ("mask bits", bits, m.bits.len().max(1)),
            ] {
                if t.3 != "int32" || !contiguous(t) || t.1.iter().product::<usize>() < n {
                    return Err(err(format!(
                        "{what} is {:?} {}; expected contiguous int32 of {n} elements",
                        t.1, t.3
                    )));
                }
            }
            (list.0, count.0, bits.0)
        }
        _ => return Err(err("mask_id and the mask's arrays go together")),
    };
    let s = plan.shape;
    for (what, t) in [("out", &out)] {
        if t.1 != q.1 || t.3 != q.3 {
            return Err(err(format!(
                "{what} is {:?} {}, q {:?} {}",
                t.1, t.3, q.1, q.3
            )));
        }
    }
    let lse_elements = plan.elements("lse").map_err(err)?;
    let (ws_o_floats, ws_lse_floats) = plan.workspace_floats().map_err(err)?;
    for (what, t, n) in [
        ("lse", &lse, lse_elements),
        ("workspace o", &ws_o, ws_o_floats),
        ("workspace lse", &ws_lse, ws_lse_floats),
    ] {
        if t.3 != "float32" || t.1.iter().product::<usize>() < n {
            return Err(err(format!(
                "{what} is {:?} {}; expected float32 of at least {n} elements",
                t.1, t.3
            )));
        }
    }
    let mut ints = vec![("block_table", &block_table), ("seqlens_k", &seqlens_k)];
    ints.push(("cu_seqlens_q", &cu_seqlens_q));
    for (what, t) in ints {
        if let Some(t) = t {
            if t.3 != "int32" || !contiguous(t) {
                return Err(err(format!("{what} must be contiguous int32, got {}", t.3)));
            }
        }
    }
    for (what, t) in [
        ("q", &q),
        ("k_cache", &k),
        ("v_cache", &v),
        ("out", &out),
        ("lse", &lse),
    ] {
        if !contiguous(t) {
            return Err(err(format!("{what} must be contiguous")));
        }
    }
    let _ = &g;
    let _ = s;
    let runner = runner(device, plan.config)?;
    // SAFETY: torch's current stream of `device`, live for the launch (as in
    // attention_forward).
    let stream = unsafe { g.device.borrowed_stream(stream) };
    let runner = runner.with_stream(stream);
    let ptr = |t: &Option<Raw>| t.as_ref().map_or(0, |t| t.0);
    let pointers = DecodePointers {
        q: q.0,
        k: k.0,
        v: v.0,
        o: out.0,
        lse: lse.0,
        ws_o: ws_o.0,
        ws_lse: ws_lse.0,
        seqlens_k: ptr(&seqlens_k),
        // An unpaged call never reads the table; a valid address all the same.
        block_table: block_table.as_ref().map_or(q.0, |t| t.0),
        cu_seqlens_q: ptr(&cu_seqlens_q),
        mask_list: mask_ptrs.0,
        mask_count: mask_ptrs.1,
        mask_bits: mask_ptrs.2,
    };
    // SAFETY: every pointer is data_ptr() of a live contiguous torch CUDA tensor whose
    // shape and dtype were checked against `plan` above (the workspace and lse at least
    // the plan's floats, the mask's arrays at least its decode form's lengths); o, lse
    // and the workspace are fresh tensors of the op.
    unsafe { runner.launch_raw(&plan, &pointers) }.map_err(err)
}
