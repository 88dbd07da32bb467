//! The CLI's attention inputs from file bytes and flag values, validated on the host
//! before any GPU work: q, k, v (`.npy` or safetensors, float types converted to bf16),
//! block masks (FragmentNative safetensors from `fragmask pack`, dense bool `.npy`,
//! synthetic specs), windows, and the size limits. Which kernel serves a call is the
//! runtime's (`fragmask_host::attention::choice`); the synthetic masks are the checking
//! crate's (`fragmask_check::synthetic`).
//!
//! Every block mask becomes a [`PackedMask`]: files are read by
//! `PackedMask::from_safetensors`, dense and synthetic masks are packed by the masks
//! crate's packer ([`blockmask::pack_for_kernel`]).
//!
//! Files are parsed by `fragmask_masks::io` (the fuzzed readers); every malformed or
//! inconsistent input is an [`InputError`] naming it. Sizes use checked arithmetic and
//! are compared with [`MAX_CALL_BYTES`] before anything is allocated.

use fragmask_check::numeric::{f16_to_f32, f32_to_bf16};
use fragmask_check::synthetic::{synthetic_region, synthetic_visible, Synthetic};
use fragmask_host::attention::blockmask::{self, pack_for_kernel, FnMask};
use fragmask_host::attention::{choice, AttentionError, AttentionOptions, AttentionShape, Window};
use fragmask_kernels::attention::Geometry;
use fragmask_masks::io::{read_array, ArrayView, DType, SafetensorsFile};
use fragmask_masks::{
    parse_predicate, DenseMask, DocumentIds, MaskError, MaskShape, MaskSource, PackedMask,
    PredicateMask,
};

/// Largest attention call accepted from files or `--random`: q, k, v and O together
/// at most 2^36 bytes of bf16 (64 GiB; an H100 has 80 GB of device memory). Checked
/// before any input tensor is converted or generated.
pub const MAX_CALL_BYTES: u64 = 1 << 36;

/// Largest input file read: a float64 q, k or v of a call within [`MAX_CALL_BYTES`]
/// is at most 4x its bf16 size. Larger files are refused before they are read.
pub const MAX_FILE_BYTES: u64 = 4 * MAX_CALL_BYTES;

/// Why an attention input was refused.
#[derive(Debug)]
#[non_exhaustive]
pub enum InputError {
    /// The bytes are not a readable `.npy` / safetensors array, or lack a tensor.
    File {
        /// The input (file and flag).
        what: String,
        /// The reader's error.
        source: MaskError,
    },
    /// The input is well-formed but does not fit the call (shapes, dtype, mask).
    Invalid {
        /// The input (file and flag).
        what: String,
        /// What is wrong.
        message: String,
    },
    /// A flag value is malformed.
    Flag {
        /// The flag.
        flag: &'static str,
        /// Its value as given.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
    /// The call is larger than the documented limit.
    TooLarge {
        /// The input.
        what: String,
        /// Bytes needed (`None`: more than 2^64).
        bytes: Option<u64>,
        /// The limit.
        limit: u64,
    },
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputError::File { what, source } => write!(f, "{what}: {source}"),
            InputError::Invalid { what, message } => write!(f, "{what}: {message}"),
            InputError::Flag {
                flag,
                value,
                expected,
            } => write!(f, "{flag} {value}: expected {expected}"),
            InputError::TooLarge { what, bytes, limit } => {
                let needed = bytes.map_or("more than 2^64".to_string(), |b| b.to_string());
                write!(
                    f,
                    "{what}: the call needs {needed} bytes of q, k, v and O; the limit is {limit} bytes"
                )
            }
        }
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::File { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn file_err(what: &str) -> impl FnOnce(MaskError) -> InputError + '_ {
    move |source| InputError::File {
        what: what.to_string(),
        source,
    }
}

fn invalid(what: &str, message: impl Into<String>) -> InputError {
    InputError::Invalid {
        what: what.to_string(),
        message: message.into(),
    }
}

/// q, k and v as bf16 bits, with their validated shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qkv {
    /// The call's extents.
    pub shape: AttentionShape,
    /// `[B, H, Sq, D]` bf16 bits.
    pub q: Vec<u16>,
    /// `[B, Hkv, Sk, D]` bf16 bits.
    pub k: Vec<u16>,
    /// `[B, Hkv, Sk, D]` bf16 bits.
    pub v: Vec<u16>,
}

/// Bytes of q, k, v and O in bf16 for `shape` (`None`: more than 2^64).
pub fn call_bytes(shape: &AttentionShape) -> Option<u64> {
    let s = shape;
    let q = [s.batch, s.heads, s.seqlen_q, s.head_dim]
        .iter()
        .try_fold(2u64, |acc, &d| acc.checked_mul(d as u64))?;
    let kv = [s.batch, s.kv_heads, s.seqlen_k, s.head_dim]
        .iter()
        .try_fold(2u64, |acc, &d| acc.checked_mul(d as u64))?;
    q.checked_mul(2)?.checked_add(kv.checked_mul(2)?)
}

/// Checks `shape` (extents, head dim, `Hkv | H`) and the [`MAX_CALL_BYTES`] limit.
pub fn check_shape(shape: &AttentionShape, what: &str) -> Result<(), InputError> {
    shape.validate().map_err(|e| invalid(what, e.to_string()))?;
    match call_bytes(shape) {
        Some(b) if b <= MAX_CALL_BYTES => Ok(()),
        bytes => Err(InputError::TooLarge {
            what: what.to_string(),
            bytes,
            limit: MAX_CALL_BYTES,
        }),
    }
}

fn shape4(shape: &[usize], what: &str) -> Result<[usize; 4], InputError> {
    shape
        .try_into()
        .map_err(|_| invalid(what, format!("must be [B, H, S, D], got shape {shape:?}")))
}

/// The shape of `--random B,H,HKV,SQ,SK,D`, checked (nothing is generated here).
pub fn random_shape(values: &[usize]) -> Result<AttentionShape, InputError> {
    let flag = |expected| InputError::Flag {
        flag: "--random",
        value: values
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(","),
        expected,
    };
    let [batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim]: [usize; 6] = values
        .try_into()
        .map_err(|_| flag("six extents B,H,HKV,SQ,SK,D"))?;
    let shape = AttentionShape {
        batch,
        heads,
        kv_heads,
        seqlen_q,
        seqlen_k,
        head_dim,
    };
    check_shape(&shape, "--random")?;
    Ok(shape)
}

/// Random bf16 inputs for a shape accepted by [`random_shape`] (xorshift + Irwin-Hall(4):
/// roughly standard normal). Allocation failure is an error, not an abort.
pub fn random_qkv(shape: AttentionShape, seed: u64) -> Result<Qkv, InputError> {
    check_shape(&shape, "--random")?;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut gen = |n: usize| -> Result<Vec<u16>, InputError> {
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| InputError::TooLarge {
            what: "--random (host memory)".into(),
            bytes: (n as u64).checked_mul(2),
            limit: MAX_CALL_BYTES,
        })?;
        v.extend((0..n).map(|_| {
            let mut acc = 0.0f32;
            for _ in 0..4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                acc += (state >> 40) as f32 / (1u64 << 24) as f32;
            }
            f32_to_bf16((acc - 2.0) * 1.732)
        }));
        Ok(v)
    };
    // check_shape bounded every product by MAX_CALL_BYTES.
    let nq = shape.q_shape().iter().product();
    let nkv = shape.kv_shape().iter().product();
    Ok(Qkv {
        shape,
        q: gen(nq)?,
        k: gen(nkv)?,
        v: gen(nkv)?,
    })
}

/// File formats, told apart by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `\x93NUMPY`.
    Npy,
    /// An 8-byte little-endian header length, then a JSON object.
    Safetensors,
}

fn sniff(bytes: &[u8], what: &str) -> Result<Format, InputError> {
    if bytes.starts_with(b"\x93NUMPY") {
        Ok(Format::Npy)
    } else if bytes.get(8) == Some(&b'{') {
        Ok(Format::Safetensors)
    } else {
        Err(invalid(
            what,
            "neither a .npy file (no \\x93NUMPY magic) nor a safetensors file \
             (no 8-byte header length followed by '{')",
        ))
    }
}

/// A safetensors file: refuses `.npy` and unknown formats with a clear message.
fn safetensors_file<'a>(bytes: &'a [u8], what: &str) -> Result<SafetensorsFile<'a>, InputError> {
    if sniff(bytes, what)? == Format::Npy {
        return Err(invalid(
            what,
            "is a .npy file; a safetensors file is needed here",
        ));
    }
    SafetensorsFile::parse(bytes).map_err(file_err(what))
}

/// One array from file bytes: `.npy`, or safetensors holding `name` or exactly one tensor.
pub fn tensor_from_bytes<'a>(
    bytes: &'a [u8],
    name: &str,
    what: &str,
) -> Result<ArrayView<'a>, InputError> {
    if sniff(bytes, what)? == Format::Npy {
        return read_array(bytes, None).map_err(file_err(what));
    }
    let file = SafetensorsFile::parse(bytes).map_err(file_err(what))?;
    if file.names().iter().any(|n| n == name) {
        return file.tensor(name).map_err(file_err(what));
    }
    read_array(bytes, None).map_err(file_err(what))
}

/// Float elements as bf16 bits (f32, f16, f64 rounded to nearest even; f64 through f32).
pub fn to_bf16(view: &ArrayView<'_>, what: &str) -> Result<Vec<u16>, InputError> {
    let d = view.data;
    let mut out = Vec::new();
    out.try_reserve_exact(view.elements())
        .map_err(|_| invalid(what, "out of host memory"))?;
    match view.dtype {
        DType::BF16 => out.extend(d.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]))),
        DType::F16 => out.extend(
            d.chunks_exact(2)
                .map(|c| f32_to_bf16(f16_to_f32(u16::from_le_bytes([c[0], c[1]])))),
        ),
        DType::F32 => out.extend(
            d.chunks_exact(4)
                .map(|c| f32_to_bf16(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        ),
        DType::F64 => out.extend(d.chunks_exact(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            f32_to_bf16(f64::from_le_bytes(b) as f32)
        })),
        other => {
            return Err(invalid(
                what,
                format!(
                    "wrong dtype {}: expected bfloat16, float16, float32 or float64",
                    other.name()
                ),
            ))
        }
    }
    Ok(out)
}

/// Checks the shapes of q, k, v (rank 4, agreeing, supported, within the limit), then
/// converts them. `what` names the three inputs.
pub fn qkv_from_views(
    q: &ArrayView<'_>,
    k: &ArrayView<'_>,
    v: &ArrayView<'_>,
    what: [&str; 3],
) -> Result<Qkv, InputError> {
    let qs = shape4(&q.shape, what[0])?;
    let ks = shape4(&k.shape, what[1])?;
    let vs = shape4(&v.shape, what[2])?;
    let all = format!("{}, {}, {}", what[0], what[1], what[2]);
    let shape =
        AttentionShape::from_tensors(qs, ks, vs).map_err(|e| invalid(&all, e.to_string()))?;
    check_shape(&shape, &all)?;
    Ok(Qkv {
        shape,
        q: to_bf16(q, what[0])?,
        k: to_bf16(k, what[1])?,
        v: to_bf16(v, what[2])?,
    })
}

/// q, k, v from one safetensors file holding tensors `q`, `k` and `v`.
pub fn qkv_from_safetensors(bytes: &[u8], what: &str) -> Result<Qkv, InputError> {
    let file = safetensors_file(bytes, what)?;
    let get = |n: &str| file.tensor(n).map_err(file_err(what));
    let (q, k, v) = (get("q")?, get("k")?, get("v")?);
    let names = [
        format!("{what} tensor q"),
        format!("{what} tensor k"),
        format!("{what} tensor v"),
    ];
    qkv_from_views(&q, &k, &v, [&names[0], &names[1], &names[2]])
}

/// `--window LEFT,RIGHT` (each `-1` for unbounded, else `0..=2^32-1`) at `diag_offset`.
pub fn parse_window(values: &[i64], diag_offset: i32) -> Result<Window, InputError> {
    let flag = || InputError::Flag {
        flag: "--window",
        value: values
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(","),
        expected: "LEFT,RIGHT, each -1 (unbounded) or 0..=4294967295",
    };
    let bound = |x: i64| match x {
        -1 => Ok(None),
        x => u32::try_from(x).map(Some).map_err(|_| flag()),
    };
    match values {
        [l, r] => Ok(Window {
            left: bound(*l)?,
            right: bound(*r)?,
            diag_offset,
        }),
        _ => Err(flag()),
    }
}

/// Parses `random:P`, `topk:F` or `blocksparse:T:P` (probabilities in 0..=1).
pub fn parse_synthetic(spec: &str) -> Result<Synthetic, InputError> {
    let flag = || InputError::Flag {
        flag: "--synthetic-mask",
        value: spec.to_string(),
        expected: "random:P, topk:F or blocksparse:T:P with P, F, T in 0..=1",
    };
    let prob = |s: &str| -> Result<f64, InputError> {
        match s.parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
            _ => Err(flag()),
        }
    };
    let parts: Vec<&str> = spec.split(':').collect();
    match parts.as_slice() {
        ["random" | "topk", p] => Ok(Synthetic::Random(prob(p)?)),
        ["blocksparse", t, p] => Ok(Synthetic::BlockSparse(prob(t)?, prob(p)?)),
        _ => Err(flag()),
    }
}

/// A block mask input, validated against the call's shape; packing (dense and
/// synthetic masks) is left to [`MaskInput::build`].
#[derive(Debug, Clone)]
pub enum MaskInput {
    /// A FragmentNative mask read from a file (already validated; boxed: a
    /// `PackedMask` carries its encoding table).
    Packed(Box<PackedMask>),
    /// A dense bool mask `[B|1, H|1, Sq, Sk]`.
    Dense {
        /// Mask batch (1 or the call's).
        batch: usize,
        /// Mask heads (1 or the call's).
        heads: usize,
        /// `batch * heads * Sq * Sk` bytes, nonzero = visible.
        bytes: Vec<u8>,
    },
    /// A synthetic mask with its seed.
    Synthetic(Synthetic, u64),
    /// A predicate mask (`--predicate`, the grammar of `fragmask pack --predicate`),
    /// packed here; causal or full within documents keeps its documents, so the forward
    /// runs the documents grid.
    Predicate(Box<PredicateMask>),
}

impl MaskInput {
    /// The geometry a call with `opts` runs this mask at, for `shape` (the one it was
    /// validated against): a packed mask's own tile ([`choice::call_geometry`]), else
    /// the tile the runtime packs the mask at ([`choice::pack_geometry`]).
    pub fn geometry(
        &self,
        shape: &AttentionShape,
        opts: &AttentionOptions,
    ) -> Result<Geometry, AttentionError> {
        match self {
            MaskInput::Packed(m) => choice::call_geometry(shape.head_dim, Some(m), opts),
            _ => self.with_source(shape, |source| {
                choice::pack_geometry(shape.head_dim, source, opts)
            })?,
        }
    }

    /// Packs (dense, synthetic: the masks crate's packer, for the tile of `geometry`) or
    /// returns the mask (whose own tile decides), for `shape` (the one it was validated
    /// against).
    pub fn build(
        self,
        shape: &AttentionShape,
        geometry: &Geometry,
    ) -> Result<PackedMask, AttentionError> {
        match self {
            MaskInput::Packed(m) => Ok(*m),
            unpacked => unpacked.with_source(shape, |source| pack_for_kernel(source, geometry))?,
        }
    }

    /// `f` of the mask source of a dense or synthetic mask over `shape`; a packed mask
    /// has none (an error).
    fn with_source<T>(
        &self,
        shape: &AttentionShape,
        f: impl FnOnce(&dyn MaskSource) -> T,
    ) -> Result<T, AttentionError> {
        let (sq, sk) = (shape.seqlen_q, shape.seqlen_k);
        match self {
            MaskInput::Packed(_) => Err(AttentionError::Shape(
                "a packed mask has no source to pack".to_string(),
            )),
            MaskInput::Dense {
                batch,
                heads,
                bytes,
            } => {
                let dense = DenseMask::new(bytes, &[*batch, *heads, sq, sk])
                    .map_err(AttentionError::Masks)?;
                Ok(f(&dense))
            }
            MaskInput::Predicate(p) => Ok(f(p.as_ref())),
            MaskInput::Synthetic(spec, seed) => {
                let (spec, seed) = (*spec, *seed);
                let mask_shape = MaskShape::new(1, 1, sq, sk).map_err(AttentionError::Masks)?;
                Ok(f(&FnMask::with_region(
                    mask_shape,
                    move |b, h, i, j| synthetic_visible(spec, seed, b, h, i, j),
                    move |b, h, rows, cols| synthetic_region(spec, seed, (b, h), rows, cols),
                )))
            }
        }
    }
}

/// Checks a mask's batch and heads against the call (1 broadcasts).
fn check_broadcast(batch: usize, heads: usize, s: &AttentionShape) -> Result<(), String> {
    if (batch == 1 || batch == s.batch) && (heads == 1 || heads == s.heads) {
        Ok(())
    } else {
        Err(format!(
            "mask batch x heads {batch}x{heads} must be 1 or equal to the call's {}x{}",
            s.batch, s.heads
        ))
    }
}

/// A synthetic mask for `shape`, checked against the packer's limit.
pub fn synthetic_mask(
    spec: Synthetic,
    seed: u64,
    shape: &AttentionShape,
) -> Result<MaskInput, InputError> {
    blockmask::check_pack_size(1, 1, shape.seqlen_q, shape.seqlen_k)
        .map_err(|e| invalid("--synthetic-mask", e.to_string()))?;
    Ok(MaskInput::Synthetic(spec, seed))
}

/// Document ids `[S]` or `[B, S]` from the bytes of a `.npy` or single-tensor safetensors
/// file; `lengths` names the two sequence lengths S must equal (one list serves queries
/// and keys).
pub fn document_ids(
    bytes: &[u8],
    lengths: [(&'static str, usize); 2],
) -> Result<DocumentIds, MaskError> {
    let view = read_array(bytes, None)?;
    let ids = view.to_i64("document ids")?;
    DocumentIds::from_array(&view.shape, &ids, lengths)
}

/// A predicate mask over the call's `Sq x Sk` (`text` in the grammar of
/// [`parse_predicate`]); `doc=FILE` reads document ids `[S]` or `[B, S]` through
/// `read_ids(FILE)` (the file's bytes), whose length must be both sequence lengths.
pub fn predicate_mask(
    text: &str,
    shape: &AttentionShape,
    read_ids: &mut dyn FnMut(&str) -> Result<Vec<u8>, MaskError>,
) -> Result<MaskInput, InputError> {
    const WHAT: &str = "--predicate";
    let (sq, sk) = (shape.seqlen_q, shape.seqlen_k);
    let mut load = |name: &str| -> Result<DocumentIds, MaskError> {
        document_ids(
            &read_ids(name)?,
            [
                ("document ids length (must equal Sq)", sq),
                ("document ids length (must equal Sk)", sk),
            ],
        )
    };
    let predicate = parse_predicate(text, &mut load).map_err(|e| invalid(WHAT, e.to_string()))?;
    let mask = PredicateMask::new(sq, sk, predicate).map_err(|e| invalid(WHAT, e.to_string()))?;
    let batch = mask.shape().batch;
    check_broadcast(batch, 1, shape).map_err(|e| invalid(WHAT, e))?;
    blockmask::check_pack_size(batch, 1, sq, sk).map_err(|e| invalid(WHAT, e.to_string()))?;
    Ok(MaskInput::Predicate(Box::new(mask)))
}

/// A dense bool / uint8 mask `[B|1, H|1, Sq, Sk]` from `.npy` or safetensors bytes.
pub fn dense_mask(
    bytes: &[u8],
    shape: &AttentionShape,
    what: &str,
) -> Result<MaskInput, InputError> {
    sniff(bytes, what)?;
    let view = read_array(bytes, None).map_err(file_err(what))?;
    let data = view.mask_bytes("dense mask").map_err(file_err(what))?;
    let [b, h, sq, sk] = match view.shape.as_slice() {
        &[b, h, sq, sk] => [b, h, sq, sk],
        other => {
            return Err(invalid(
                what,
                format!("dense mask must be [B|1, H|1, Sq, Sk], got shape {other:?}"),
            ))
        }
    };
    if sq != shape.seqlen_q || sk != shape.seqlen_k {
        return Err(invalid(
            what,
            format!(
                "dense mask is {sq}x{sk}, the attention is Sq x Sk = {}x{}",
                shape.seqlen_q, shape.seqlen_k
            ),
        ));
    }
    check_broadcast(b, h, shape).map_err(|m| invalid(what, m))?;
    blockmask::check_pack_size(b, h, sq, sk).map_err(|e| invalid(what, e.to_string()))?;
    Ok(MaskInput::Dense {
        batch: b,
        heads: h,
        bytes: data.to_vec(),
    })
}

/// A FragmentNative block mask (safetensors from `fragmask pack`), read and validated in
/// full by `PackedMask::from_safetensors` (docs/masks.md), then checked against the
/// kernel's tile and encoding and against `shape`.
pub fn packed_mask(
    bytes: &[u8],
    shape: &AttentionShape,
    what: &str,
) -> Result<MaskInput, InputError> {
    safetensors_file(bytes, what)?;
    let mask = PackedMask::from_safetensors(bytes).map_err(file_err(what))?;
    blockmask::mask_geometry(&mask).map_err(|e| invalid(what, e.to_string()))?;
    blockmask::check_fits(&mask, shape).map_err(|e| invalid(what, e.to_string()))?;
    Ok(MaskInput::Packed(Box::new(mask)))
}

/// (visited tiles, partial tiles) of a window mask over the whole call, mirroring the
/// kernel's schedule; O(query blocks), so any valid shape is counted quickly.
pub fn window_tiles(w: &Window, s: &AttentionShape, g: &Geometry) -> (u64, u64) {
    let (bm, bn) = (i64::from(g.block_m()), i64::from(g.block_n()));
    let (sq, sk) = (s.seqlen_q as i64, s.seqlen_k as i64);
    let d = i64::from(w.diag_offset);
    let nb = (sk + bn - 1) / bn;
    let (mut visited, mut partial) = (0u64, 0u64);
    for m in 0..(sq + bm - 1) / bm {
        let m0 = m * bm;
        let m_end = (m0 + bm).min(sq) - 1;
        // Visited: n0 + bn > m0 + d - l and n0 <= m_end + d + r.
        let lo = w
            .left
            .map_or(0, |l| (m0 + d - i64::from(l) - bn).div_euclid(bn) + 1)
            .max(0);
        let hi = w
            .right
            .map_or(nb - 1, |r| (m_end + d + i64::from(r)).div_euclid(bn))
            .min(nb - 1);
        if hi < lo {
            continue;
        }
        // Full: n0 >= m_end + d - l, n0 + bn - 1 <= m0 + d + r, n0 + bn <= sk.
        let f_lo = w
            .left
            .map_or(0, |l| (m_end + d - i64::from(l) + bn - 1).div_euclid(bn))
            .max(lo);
        let f_hi = w
            .right
            .map_or(i64::MAX, |r| {
                (m0 + d + i64::from(r) - bn + 1).div_euclid(bn)
            })
            .min(sk / bn - 1)
            .min(hi);
        let v = (hi - lo + 1) as u64;
        let full = if f_hi >= f_lo {
            (f_hi - f_lo + 1) as u64
        } else {
            0
        };
        visited += v;
        partial += v - full;
    }
    let heads = (s.batch * s.heads) as u64;
    (visited * heads, partial * heads)
}

#[cfg(test)]
mod tests {
    use fragmask_check::synthetic::{block_sparse, random_tokens};
    use fragmask_masks::io::write_npy;

    use super::*;

    fn shape(b: usize, h: usize, hk: usize, sq: usize, sk: usize, d: usize) -> AttentionShape {
        AttentionShape {
            batch: b,
            heads: h,
            kv_heads: hk,
            seqlen_q: sq,
            seqlen_k: sk,
            head_dim: d,
        }
    }

    /// The former tile-by-tile count, kept as the oracle.
    fn window_tiles_by_tile(w: &Window, s: &AttentionShape, g: &Geometry) -> (u64, u64) {
        let (bm, bn) = (i64::from(g.block_m()), i64::from(g.block_n()));
        let nb = (s.seqlen_k as i64 + bn - 1) / bn;
        let d = i64::from(w.diag_offset);
        let (mut visited, mut partial) = (0u64, 0u64);
        for m in 0..(s.seqlen_q as i64 + bm - 1) / bm {
            let m0 = m * bm;
            let m_end = (m0 + bm).min(s.seqlen_q as i64) - 1;
            for n in 0..nb {
                let n0 = n * bn;
                let lo_ok = w.left.is_none_or(|l| n0 + bn > m0 + d - i64::from(l));
                let hi_ok = w.right.is_none_or(|r| n0 <= m_end + d + i64::from(r));
                if !(lo_ok && hi_ok) {
                    continue;
                }
                visited += 1;
                let full = w.left.is_none_or(|l| n0 >= m_end + d - i64::from(l))
                    && w.right.is_none_or(|r| n0 + bn - 1 <= m0 + d + i64::from(r))
                    && n0 + bn <= s.seqlen_k as i64;
                if !full {
                    partial += 1;
                }
            }
        }
        let heads = (s.batch * s.heads) as u64;
        (visited * heads, partial * heads)
    }

    #[test]
    fn window_tiles_equals_the_tile_by_tile_count() {
        let bounds = [
            None,
            Some(0),
            Some(1),
            Some(127),
            Some(128),
            Some(300),
            Some(5000),
        ];
        for g in [
            Geometry::TILE_128X128,
            Geometry::TILE_64X64,
            Geometry::TILE_128X80,
        ] {
            for &(sq, sk) in &[(1, 1), (128, 128), (130, 257), (1000, 600), (77, 2000)] {
                for &left in &bounds {
                    for &right in &bounds {
                        for diag_offset in [-700, -129, -1, 0, 1, 128, 523] {
                            let w = Window {
                                left,
                                right,
                                diag_offset,
                            };
                            let s = shape(2, 3, 1, sq, sk, 64);
                            assert_eq!(
                                window_tiles(&w, &s, &g),
                                window_tiles_by_tile(&w, &s, &g),
                                "{w:?} {sq}x{sk} {g}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_shape_refuses_huge_and_malformed_shapes_before_allocating() {
        let huge = random_shape(&[1, 1, 1, 1 << 30, 1, 256]).unwrap_err();
        assert!(matches!(huge, InputError::TooLarge { .. }), "{huge}");
        let wrap = random_shape(&[65535, 65535, 65535, 1 << 30, 1 << 30, 256]).unwrap_err();
        assert!(matches!(wrap, InputError::TooLarge { .. }), "{wrap}");
        assert!(matches!(
            random_shape(&[1, 2, 3]).unwrap_err(),
            InputError::Flag { .. }
        ));
        let gqa = random_shape(&[1, 3, 2, 128, 128, 64]).unwrap_err();
        assert!(gqa.to_string().contains("do not divide"), "{gqa}");
        let s = random_shape(&[1, 2, 1, 130, 200, 64]).unwrap();
        let qkv = random_qkv(s, 1).unwrap();
        assert_eq!((qkv.q.len(), qkv.k.len()), (2 * 130 * 64, 200 * 64));
    }

    #[test]
    fn float_npy_inputs_convert_to_bf16_and_shapes_are_cross_checked() {
        let q = write_npy(DType::F32, &[1, 1, 2, 64], &[0u8; 4 * 128]);
        let mut ones = Vec::new();
        for _ in 0..128 {
            ones.extend_from_slice(&1.0f32.to_le_bytes());
        }
        let k = write_npy(DType::F32, &[1, 1, 2, 64], &ones);
        let half: Vec<u8> = (0..128).flat_map(|_| 0x3C00u16.to_le_bytes()).collect();
        let v = write_npy(DType::F16, &[1, 1, 2, 64], &half);
        let view = |b| tensor_from_bytes(b, "x", "x").unwrap();
        let qkv = qkv_from_views(&view(&q), &view(&k), &view(&v), ["q", "k", "v"]).unwrap();
        assert!(qkv.k.iter().chain(&qkv.v).all(|&b| b == 0x3F80));
        let short_v = write_npy(DType::F16, &[1, 1, 1, 64], &half[..128]);
        let e = qkv_from_views(&view(&q), &view(&k), &view(&short_v), ["q", "k", "v"]).unwrap_err();
        assert!(e.to_string().contains("differ"), "{e}");
        let ints = write_npy(DType::I32, &[1, 1, 2, 64], &[0u8; 4 * 128]);
        let e = qkv_from_views(&view(&ints), &view(&k), &view(&v), ["q", "k", "v"]).unwrap_err();
        assert!(e.to_string().contains("wrong dtype int32"), "{e}");
    }

    #[test]
    fn malformed_flags_are_refused_with_the_flag_named() {
        for bad in [&[1i64][..], &[1, 2, 3], &[-2, 0], &[0, 1 << 32]] {
            let e = parse_window(bad, 0).unwrap_err();
            assert!(e.to_string().starts_with("--window"), "{e}");
        }
        assert_eq!(parse_window(&[-1, 0], 3).unwrap().right, Some(0));
        for bad in [
            "random",
            "random:2",
            "random:x",
            "blocksparse:0.5",
            "zz:1",
            "topk:0.1:1",
        ] {
            let e = parse_synthetic(bad).unwrap_err();
            assert!(e.to_string().starts_with("--synthetic-mask"), "{e}");
        }
        assert_eq!(
            parse_synthetic("blocksparse:0.5:1").unwrap(),
            Synthetic::BlockSparse(0.5, 1.0)
        );
    }

    #[test]
    fn dense_masks_must_match_the_call_and_decode_to_their_bits() {
        let s = shape(2, 2, 1, 130, 129, 64);
        let bits: Vec<u8> = (0..130 * 129).map(|i| (i % 3 == 0) as u8).collect();
        let ok = write_npy(DType::Bool, &[1, 1, 130, 129], &bits);
        let m = dense_mask(&ok, &s, "m")
            .unwrap()
            .build(&s, &Geometry::TILE_128X128)
            .unwrap();
        let decoded: Vec<u8> = m.decode_plane(0, 0).into_iter().map(u8::from).collect();
        assert_eq!(decoded, bits);
        let wrong = write_npy(DType::Bool, &[1, 1, 129, 130], &bits);
        assert!(dense_mask(&wrong, &s, "m.npy")
            .unwrap_err()
            .to_string()
            .starts_with("m.npy: dense mask is 129x130"));
        let three = write_npy(DType::Bool, &[3, 1, 130, 129], &bits.repeat(3));
        assert!(dense_mask(&three, &s, "m")
            .unwrap_err()
            .to_string()
            .contains("must be 1 or equal"));
    }

    #[test]
    fn synthetic_masks_pack_to_their_predicate_with_or_without_region_shortcuts() {
        let s = shape(1, 1, 1, 300, 389, 64);
        for spec in [
            Synthetic::Random(0.0),
            Synthetic::Random(0.3),
            Synthetic::Random(1.0),
            Synthetic::BlockSparse(0.5, 0.5),
            Synthetic::BlockSparse(0.5, 1.0),
            Synthetic::BlockSparse(1.0, 0.0),
        ] {
            let fast = synthetic_mask(spec, 7, &s)
                .unwrap()
                .build(&s, &Geometry::TILE_128X128)
                .unwrap();
            let pred = match spec {
                Synthetic::Random(p) => random_tokens(p, 7),
                Synthetic::BlockSparse(t, p) => block_sparse(t, p, 7),
            };
            let mask_shape = MaskShape::new(1, 1, 300, 389).unwrap();
            let slow = pack_for_kernel(
                &FnMask::new(mask_shape, |b, h, i, j| pred(b, h, i, j)),
                &Geometry::TILE_128X128,
            )
            .unwrap();
            assert_eq!(fast, slow, "{spec:?}");
            let plane = fast.decode_plane(0, 0);
            assert!(
                (0..300 * 389).all(|x| plane[x] == pred(0, 0, x / 389, x % 389)),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn packed_files_read_back_and_other_tiles_are_refused_naming_the_field() {
        use fragmask_masks::{pack, Encoding, PackOptions, Predicate, PredicateMask};
        let s = shape(1, 2, 1, 200, 300, 64);
        let causal = PredicateMask::new(200, 300, Predicate::causal()).unwrap();
        let ours = blockmask::pack_for_kernel(&causal, &Geometry::TILE_128X128).unwrap();
        let bytes = ours.to_safetensors().unwrap();
        match packed_mask(&bytes, &s, "m.safetensors").unwrap() {
            MaskInput::Packed(m) => assert_eq!(*m, ours),
            other => panic!("{other:?}"),
        }
        let e = packed_mask(&bytes, &shape(1, 2, 1, 201, 300, 64), "m.safetensors").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("m.safetensors: block mask: mask built for Sq=200"),
            "{e}"
        );
        let acc = fragmask_masks::TiledAccumulator::new(64, 128, 1, false).unwrap();
        let other = pack(
            &causal,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap()
        .to_safetensors()
        .unwrap();
        let e = packed_mask(&other, &s, "o.safetensors").unwrap_err();
        assert!(
            e.to_string()
                .contains("tile 64x128 over 1 warpgroup(s) is not supported"),
            "{e}"
        );
        // A supported tile in another encoding names the field.
        let acc = fragmask_masks::TiledAccumulator::new(64, 64, 1, false).unwrap();
        let row_major = pack(&causal, &acc, Encoding::RowMajor, &PackOptions::default())
            .unwrap()
            .to_safetensors()
            .unwrap();
        let e = packed_mask(&row_major, &s, "r.safetensors").unwrap_err();
        assert!(e.to_string().contains("encoding = "), "{e}");
        let npy = write_npy(DType::Bool, &[1], &[1]);
        let e = packed_mask(&npy, &s, "q.npy").unwrap_err();
        assert!(e.to_string().contains("safetensors file is needed"), "{e}");
    }

    #[test]
    fn synthetic_block_sparse_masks_pack_at_128x128_at_head_dim_256_and_random_tokens_at_the_default(
    ) {
        let opts = AttentionOptions::default();
        for sq in [4096, 16384] {
            let s = shape(1, 16, 16, sq, sq, 256);
            let blocks = synthetic_mask(Synthetic::BlockSparse(0.1, 0.5), 7, &s).unwrap();
            assert_eq!(blocks.geometry(&s, &opts).unwrap(), Geometry::TILE_128X128);
            let tokens = synthetic_mask(Synthetic::Random(0.5), 7, &s).unwrap();
            assert_eq!(tokens.geometry(&s, &opts).unwrap(), Geometry::TILE_128X80);
            // At head dim 128 the default is already 128 wide.
            let s128 = shape(1, 16, 16, sq, sq, 128);
            assert_eq!(
                blocks.geometry(&s128, &opts).unwrap(),
                Geometry::TILE_128X128
            );
        }
        // A packed mask's own tile decides, whatever the head dim.
        let s = shape(1, 1, 1, 256, 256, 256);
        let packed = synthetic_mask(Synthetic::Random(0.5), 7, &s)
            .unwrap()
            .build(&s, &Geometry::TILE_128X80)
            .unwrap();
        let m = MaskInput::Packed(Box::new(packed));
        assert_eq!(m.geometry(&s, &opts).unwrap(), Geometry::TILE_128X80);
    }
}
