//! Decode inputs from a safetensors file (read by `masks::io`): every shape, dtype,
//! length and block table entry checked, with errors that name the tensor, before any
//! GPU work.
//!
//! Tensors: `q` `[B, Sq, H, D]` (bfloat16 or float16); `k_cache`, `v_cache` (q's dtype)
//! `[B, Sk, Hkv, D]`, or with `block_table` (int32/int64 `[B, max_pages]`) pages
//! `[num_pages, page_size, Hkv, D]`; optional `seqlens_k` (int32/int64 `[B]`, default:
//! every request at capacity).

use fragmask_kernels::family::dtype::ActDtype;
use fragmask_masks::io::{ArrayView, DType, SafetensorsFile};

use fragmask_check::decode::check::HostInputs;
use fragmask_check::decode::reference::ReferenceInputs;
use fragmask_host::decode::{CacheShape, DecodeError, DecodeShape};

use super::attention::InputError;

/// The mask and scale of a call (not in the file).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DecodeOptions {
    /// Keys a query sees to its left (`None`: all).
    pub window_left: Option<usize>,
    /// Keys a query sees to its right (`Some(0)`: causal).
    pub window_right: Option<usize>,
    /// Softmax scale (`None`: 1/√D).
    pub softmax_scale: Option<f64>,
}

fn invalid(what: &str, message: impl Into<String>) -> InputError {
    InputError::Invalid {
        what: what.to_string(),
        message: message.into(),
    }
}

fn rank4(view: &ArrayView<'_>, what: &str) -> Result<[usize; 4], InputError> {
    <[usize; 4]>::try_from(view.shape.as_slice())
        .map_err(|_| invalid(what, format!("has shape {:?}; expected rank 4", view.shape)))
}

fn act_dtype(view: &ArrayView<'_>, what: &str) -> Result<ActDtype, InputError> {
    match view.dtype {
        DType::BF16 => Ok(ActDtype::Bf16),
        DType::F16 => Ok(ActDtype::F16),
        other => Err(invalid(
            what,
            format!(
                "dtype {} is not supported: expected bfloat16 or float16",
                other.name()
            ),
        )),
    }
}

fn ints(view: &ArrayView<'_>, what: &str) -> Result<Vec<i32>, InputError> {
    if !matches!(view.dtype, DType::I32 | DType::I64) {
        return Err(invalid(
            what,
            format!(
                "dtype {} is not supported: expected int32 or int64",
                view.dtype.name()
            ),
        ));
    }
    let values = view
        .to_i64("integer tensor")
        .map_err(|e| invalid(what, e.to_string()))?;
    values
        .into_iter()
        .map(|x| i32::try_from(x).map_err(|_| invalid(what, format!("value {x} is outside int32"))))
        .collect()
}

/// The tensor of the file whose size a shape error is about.
fn tensor_of(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Size { what, .. } => match *what {
            "max_pages" => "block_table",
            "num_pages" | "capacity" | "kv_heads" => "k_cache",
            _ => "q",
        },
        DecodeError::PageSize(_) => "k_cache",
        DecodeError::HeadsNotDivisible { .. } => "k_cache",
        DecodeError::Overflow(t) => match *t {
            "k" | "v" => "k_cache",
            "block_table" => "block_table",
            _ => "q",
        },
        _ => "q",
    }
}

/// Reads and checks the inputs of one call from safetensors `bytes`; `what` names the
/// file in errors (each tensor as `what (tensor NAME)`).
pub fn decode_inputs(
    bytes: &[u8],
    what: &str,
    options: DecodeOptions,
) -> Result<(DecodeShape, HostInputs), InputError> {
    let file = SafetensorsFile::parse(bytes).map_err(|e| invalid(what, e.to_string()))?;
    let name = |t: &str| format!("{what} (tensor {t})");
    let has = |t: &str| file.names().iter().any(|n| n == t);
    let tensor = |t: &str| file.tensor(t).map_err(|e| invalid(&name(t), e.to_string()));
    let q = tensor("q")?;
    let k = tensor("k_cache")?;
    let v = tensor("v_cache")?;
    let [b, sq, h, d] = rank4(&q, &name("q"))?;
    let dtype = act_dtype(&q, &name("q"))?;
    let kd = rank4(&k, &name("k_cache"))?;
    for (view, t) in [(&k, "k_cache"), (&v, "v_cache")] {
        if act_dtype(view, &name(t))? != dtype {
            return Err(invalid(
                &name(t),
                format!(
                    "dtype {} differs from q's {}",
                    view.dtype.name(),
                    dtype.name()
                ),
            ));
        }
    }
    if v.shape != k.shape {
        return Err(invalid(
            &name("v_cache"),
            format!("has shape {:?}, k_cache has {:?}", v.shape, k.shape),
        ));
    }
    if kd[3] != d {
        return Err(invalid(
            &name("k_cache"),
            format!("head size {} differs from q's {d}", kd[3]),
        ));
    }
    let (cache, block_table) = if has("block_table") {
        let view = tensor("block_table")?;
        let [tb, max_pages] = <[usize; 2]>::try_from(view.shape.as_slice()).map_err(|_| {
            invalid(
                &name("block_table"),
                format!("has shape {:?}; expected [B, max_pages]", view.shape),
            )
        })?;
        if tb != b {
            return Err(invalid(
                &name("block_table"),
                format!("has {tb} rows, q has B = {b}"),
            ));
        }
        (
            CacheShape::Paged {
                page_size: kd[1],
                num_pages: kd[0],
                max_pages,
            },
            ints(&view, &name("block_table"))?,
        )
    } else {
        if kd[0] != b {
            return Err(invalid(
                &name("k_cache"),
                format!(
                    "has {} requests, q has B = {b} (paged caches need block_table)",
                    kd[0]
                ),
            ));
        }
        (CacheShape::Contiguous { capacity: kd[1] }, Vec::new())
    };
    let seqlens_k = if has("seqlens_k") {
        let view = tensor("seqlens_k")?;
        if view.shape != [b] {
            return Err(invalid(
                &name("seqlens_k"),
                format!("has shape {:?}; expected [{b}]", view.shape),
            ));
        }
        Some(ints(&view, &name("seqlens_k"))?)
    } else {
        None
    };
    let shape = DecodeShape {
        batch: b,
        seqlen_q: sq,
        heads: h,
        kv_heads: kd[2],
        head_dim: d,
        dtype,
        cache,
        window_left: options.window_left,
        window_right: options.window_right,
        softmax_scale: options.softmax_scale,
    }
    .validate()
    .map_err(|e| invalid(&name(tensor_of(&e)), e.to_string()))?;
    shape
        .check_lengths(seqlens_k.as_deref(), &block_table)
        .map_err(|e| invalid(what, e.to_string()))?;
    Ok((
        shape,
        HostInputs {
            q: q.data.to_vec(),
            k: k.data.to_vec(),
            v: v.data.to_vec(),
            // The f64 values are filled only for a check (HostInputs::fill_reference).
            reference: ReferenceInputs {
                q: Vec::new(),
                k: Vec::new(),
                v: Vec::new(),
                block_table,
                seqlens_k,
            },
        },
    ))
}
