//! The decode kernels against the CPU f64 [`reference`](super::reference): random inputs,
//! poisoned outputs (every element must be written), and a CUDA-graph capture replayed
//! at other lengths.

use std::sync::Arc;

use fragmask_host::cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use fragmask_kernels::family::dtype::ActDtype;

use fragmask_host::decode::{
    driver, CacheShape, DecodeError, DecodeMask, DecodeMaskDevice, DecodeOutput, DecodePlan,
    DecodePointers, DecodeRunner, DecodeShape, DecodeTensors, DecodeWorkspace,
};

use super::reference::{decode_reference_masked, decode_reference_varlen, ReferenceInputs};
use crate::lightning::check::{decode_activations, random_activations};
use crate::random::splitmix64;

/// Host inputs of one call: raw dtype bytes for the GPU, f64 values for the reference.
#[derive(Clone, Debug)]
pub struct HostInputs {
    /// q bytes.
    pub q: Vec<u8>,
    /// k bytes.
    pub k: Vec<u8>,
    /// v bytes.
    pub v: Vec<u8>,
    /// The reference's view (f64 values, block table, lengths).
    pub reference: ReferenceInputs,
}

impl HostInputs {
    /// The block table.
    pub fn block_table(&self) -> &[i32] {
        &self.reference.block_table
    }

    /// The lengths.
    pub fn seqlens_k(&self) -> Option<&[i32]> {
        self.reference.seqlens_k.as_deref()
    }

    /// Fills the reference's f64 values from the bytes (inputs read from a file leave
    /// them empty until a check needs them).
    pub fn fill_reference(&mut self, dtype: ActDtype) {
        self.reference.q = decode_activations(dtype, &self.q);
        self.reference.k = decode_activations(dtype, &self.k);
        self.reference.v = decode_activations(dtype, &self.v);
    }
}

/// A block table giving every request all of its `max_pages` slots, from a permutation of
/// the pool (`shuffle`: random; else in order), or empty when contiguous.
pub fn block_table(
    shape: &DecodeShape,
    shuffle: bool,
    seed: &mut u64,
) -> Result<Vec<i32>, DecodeError> {
    let CacheShape::Paged {
        num_pages,
        max_pages,
        ..
    } = shape.cache
    else {
        return Ok(Vec::new());
    };
    let slots = shape
        .batch
        .checked_mul(max_pages)
        .ok_or(DecodeError::Overflow("block_table"))?;
    if slots > num_pages {
        return Err(DecodeError::Size {
            what: "batch x max_pages (pages the random block table hands out)",
            value: slots,
            max: num_pages,
        });
    }
    let mut pages: Vec<i32> = (0..num_pages as i32).collect();
    if shuffle {
        for i in (1..pages.len()).rev() {
            let j = (splitmix64(seed) % (i as u64 + 1)) as usize;
            pages.swap(i, j);
        }
    }
    pages.truncate(slots);
    Ok(pages)
}

/// Host bytes of a check of `shape` against the CPU reference: q, k and v in their
/// element type and as f64, the block table, the reference's f64 o and lse, and the
/// GPU's o and lse read back.
pub fn check_host_bytes(shape: &DecodeShape) -> Result<usize, DecodeError> {
    let size = shape.dtype.size();
    let q = shape.elements("q")?;
    let kv = shape.elements("k")?;
    let lse = shape.elements("lse")?;
    let table = shape.elements("block_table")?;
    crate::limits::sum_of_products(&[
        (q, 2 * size + 16),
        (kv, 2 * (size + 8)),
        (lse, 12),
        (table, 4),
    ])
    .ok_or(DecodeError::Overflow("host bytes"))
}

/// Refuses a check of `shape` whose host copies exceed [`crate::limits::MAX_HOST_BYTES`]
/// ([`check_host_bytes`]), before anything is allocated.
pub fn check_host_budget(shape: &DecodeShape) -> Result<(), DecodeError> {
    let max = crate::limits::MAX_HOST_BYTES;
    let need = check_host_bytes(shape).unwrap_or(usize::MAX);
    if need > max {
        return Err(DecodeError::HostMemory {
            what: "the inputs and the CPU f64 reference (q, k, v as the element type and f64, o and lse)",
            need,
            max,
        });
    }
    Ok(())
}

/// Random q, k, v uniform in `[-1, 1)` rounded to the dtype, a block table
/// ([`block_table`]) and the given lengths. The host budget is checked first
/// ([`check_host_budget`]).
pub fn random_inputs(
    shape: &DecodeShape,
    seqlens_k: Option<Vec<i32>>,
    shuffle_pages: bool,
    seed: u64,
) -> Result<HostInputs, DecodeError> {
    let shape = shape.validate()?;
    check_host_budget(&shape)?;
    if let Some(lens) = &seqlens_k {
        shape.check_lengths_only(lens)?;
    }
    let mut seed = seed;
    let (q, qv) = random_activations(shape.dtype, shape.elements("q")?, &mut seed);
    let (k, kv) = random_activations(shape.dtype, shape.elements("k")?, &mut seed);
    let (v, vv) = random_activations(shape.dtype, shape.elements("v")?, &mut seed);
    let table = block_table(&shape, shuffle_pages, &mut seed)?;
    shape.check_lengths(seqlens_k.as_deref(), &table)?;
    Ok(HostInputs {
        q,
        k,
        v,
        reference: ReferenceInputs {
            q: qv,
            k: kv,
            v: vv,
            block_table: table,
            seqlens_k,
        },
    })
}

/// Random lengths in `0..=capacity` for each request, the first at capacity and, with
/// two or more requests, the second at 0 (a request with no keys).
pub fn random_lengths(shape: &DecodeShape, seed: u64) -> Vec<i32> {
    let mut seed = seed ^ 0x1e57;
    let cap = shape.cache.capacity() as u64;
    (0..shape.batch)
        .map(|b| match b {
            0 => cap as i32,
            1 => 0,
            _ => (splitmix64(&mut seed) % (cap + 1)) as i32,
        })
        .collect()
}

/// How a GPU result compares with the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// `‖o − ref‖ / ‖ref‖`.
    pub o_error: f64,
    /// Largest `|lse − ref|` over rows with a visible key.
    pub lse_error: f64,
    /// Elements of o or lse that are NaN or infinite where the reference is finite
    /// (unwritten elements stay poisoned NaN).
    pub non_finite: usize,
    /// Rows with no visible key whose o is not exactly 0 or whose lse is not −∞.
    pub bad_empty_rows: usize,
    /// The bound on `o_error` (the dtype's rounding of P and o).
    pub o_tolerance: f64,
    /// The bound on `lse_error`.
    pub lse_tolerance: f64,
}

impl Comparison {
    /// Whether every check holds.
    pub fn passed(&self) -> bool {
        self.o_error <= self.o_tolerance
            && self.lse_error <= self.lse_tolerance
            && self.non_finite == 0
            && self.bad_empty_rows == 0
    }
}

/// Compares o (dtype bytes) and lse with the f64 reference.
pub fn compare(shape: &DecodeShape, inputs: &ReferenceInputs, o: &[u8], lse: &[f32]) -> Comparison {
    compare_masked(shape, inputs, None, o, lse)
}

/// [`compare`] against the masked reference.
pub fn compare_masked(
    shape: &DecodeShape,
    inputs: &ReferenceInputs,
    mask: Option<&DecodeMask>,
    o: &[u8],
    lse: &[f32],
) -> Comparison {
    let (ref_o, ref_lse) = decode_reference_masked(shape, inputs, mask);
    // lse is [B, H, Sq]; o is [B, Sq, H, D].
    let (sq, h) = (shape.seqlen_q, shape.heads);
    compare_states(shape, &ref_o, &ref_lse, o, lse, |row| {
        let (b, rest) = (row / (h * sq), row % (h * sq));
        let (head, t) = (rest / sq, rest % sq);
        ((b * sq + t) * h + head) * shape.head_dim
    })
}

/// [`compare_masked`] for a plan with variable query lengths: o `[total_q, H, D]`, lse
/// `[H, total_q]`; rows no request covers are not compared.
pub fn compare_varlen(
    plan: &DecodePlan,
    inputs: &ReferenceInputs,
    mask: Option<&DecodeMask>,
    cu_seqlens_q: &[i32],
    o: &[u8],
    lse: &[f32],
) -> Comparison {
    let shape = &plan.shape;
    let total = plan.total_q.unwrap_or(shape.batch * shape.seqlen_q);
    let (ref_o, ref_lse) = decode_reference_varlen(shape, inputs, mask, cu_seqlens_q, total);
    let h = shape.heads;
    compare_states(shape, &ref_o, &ref_lse, o, lse, |row| {
        let (head, r) = (row / total, row % total);
        (r * h + head) * shape.head_dim
    })
}

/// The comparison of o and lse with the reference's; `o_at(lse index)` is the row's
/// offset in o. A reference lse of NaN marks a row that is not compared.
fn compare_states(
    shape: &DecodeShape,
    ref_o: &[f64],
    ref_lse: &[f64],
    o: &[u8],
    lse: &[f32],
    o_at: impl Fn(usize) -> usize,
) -> Comparison {
    let got = decode_activations(shape.dtype, o);
    let d = shape.head_dim;
    let (mut diff, mut norm, mut non_finite, mut bad_empty) = (0.0f64, 0.0f64, 0usize, 0usize);
    for (row, (r_lse, g_lse)) in ref_lse.iter().zip(lse).enumerate() {
        if r_lse.is_nan() {
            continue;
        }
        let at = o_at(row);
        let (ro, go) = (&ref_o[at..at + d], &got[at..at + d]);
        if *r_lse == f64::NEG_INFINITY {
            if *g_lse != f32::NEG_INFINITY || go.iter().any(|&x| x != 0.0) {
                bad_empty += 1;
            }
            continue;
        }
        if !g_lse.is_finite() || go.iter().any(|x| !x.is_finite()) {
            non_finite += 1;
            continue;
        }
        for (x, y) in go.iter().zip(ro) {
            diff += (x - y) * (x - y);
            norm += y * y;
        }
    }
    let lse_error = ref_lse
        .iter()
        .zip(lse)
        .filter(|(r, g)| r.is_finite() && g.is_finite())
        .map(|(r, g)| (f64::from(*g) - r).abs())
        .fold(0.0, f64::max);
    Comparison {
        o_error: if norm > 0.0 {
            (diff / norm).sqrt()
        } else {
            diff.sqrt()
        },
        lse_error,
        non_finite,
        bad_empty_rows: bad_empty,
        o_tolerance: match shape.dtype {
            ActDtype::F16 => 4e-3,
            _ => 1.6e-2,
        },
        lse_tolerance: 2e-3,
    }
}

fn poison(stream: &Arc<CudaStream>, out: &mut DecodeOutput) -> Result<(), DecodeError> {
    // 0xFF bytes: NaN in bf16, f16 and f32.
    let o = vec![0xFFu8; out.o.len()];
    stream
        .memcpy_htod(&o, &mut out.o)
        .map_err(driver("poisoning o"))?;
    let lse = vec![f32::NAN; out.lse.len()];
    stream
        .memcpy_htod(&lse, &mut out.lse)
        .map_err(driver("poisoning lse"))
}

/// Runs `plan` once on `inputs` (outputs poisoned first) and compares with the reference.
pub fn check(
    runner: &DecodeRunner,
    plan: &DecodePlan,
    inputs: &HostInputs,
) -> Result<Comparison, DecodeError> {
    run_and_compare(runner, plan, inputs, None)
}

/// [`check`] with a block-sparse mask (the runner compiled for the mask's tile, the plan
/// from [`DecodeRunner::plan_masked`]).
pub fn check_masked(
    runner: &DecodeRunner,
    plan: &DecodePlan,
    inputs: &HostInputs,
    mask: &DecodeMask,
) -> Result<Comparison, DecodeError> {
    run_and_compare(runner, plan, inputs, Some(mask))
}

/// [`check`] and [`check_masked`]: upload, poison, launch once, compare.
fn run_and_compare(
    runner: &DecodeRunner,
    plan: &DecodePlan,
    inputs: &HostInputs,
    mask: Option<&DecodeMask>,
) -> Result<Comparison, DecodeError> {
    let s = runner.stream().clone();
    let shape = plan.shape;
    let tensors = DecodeTensors::upload(
        &s,
        &shape,
        &inputs.q,
        &inputs.k,
        &inputs.v,
        inputs.block_table(),
        inputs.seqlens_k(),
    )?;
    let device_mask = mask.map(|m| DecodeMaskDevice::upload(&s, m)).transpose()?;
    let mut out = DecodeOutput::new(&s, &shape)?;
    let mut ws = DecodeWorkspace::new(&s, plan)?;
    poison(&s, &mut out)?;
    runner.launch_masked(plan, &tensors, device_mask.as_ref(), &mut out, &mut ws)?;
    let o = s.clone_dtoh(&out.o).map_err(driver("reading o back"))?;
    let lse = s.clone_dtoh(&out.lse).map_err(driver("reading lse back"))?;
    Ok(compare_masked(&shape, &inputs.reference, mask, &o, &lse))
}

/// Runs a varlen `plan` (from [`DecodePlan::with_varlen`], masked or not) on q rows
/// `q` (`[total_q, H, D]` bytes) with each of `cu_list`'s offsets: the first launched
/// plainly, then captured once in a CUDA graph and replayed with every entry written into
/// the same device `cu_seqlens_q` (outputs poisoned before each run), each compared with
/// the reference at its offsets.
pub fn check_varlen(
    runner: &DecodeRunner,
    plan: &DecodePlan,
    inputs: &HostInputs,
    mask: Option<&DecodeMask>,
    cu_list: &[Vec<i32>],
) -> Result<Vec<Comparison>, DecodeError> {
    let shape = plan.shape;
    let first = cu_list.first().ok_or(DecodeError::Shape {
        tensor: "cu_seqlens_q",
        got: 0,
        expected: shape.batch + 1,
    })?;
    for cu in cu_list {
        plan.check_cu_seqlens_q(cu)?;
    }
    let context = runner.stream().context().clone();
    let stream = context
        .new_stream()
        .map_err(driver("creating the capture stream"))?;
    let captured = runner.with_stream(stream.clone());
    let mut tensors = DecodeTensors::upload_varlen(
        &stream,
        plan,
        &inputs.q,
        &inputs.k,
        &inputs.v,
        inputs.block_table(),
        inputs.seqlens_k(),
        first,
    )?;
    let device_mask = mask
        .map(|m| DecodeMaskDevice::upload(&stream, m))
        .transpose()?;
    let mut out = DecodeOutput::for_plan(&stream, plan)?;
    let mut ws = DecodeWorkspace::new(&stream, plan)?;
    let mut results = Vec::with_capacity(cu_list.len() + 1);
    let read_back = |out: &DecodeOutput, cu: &[i32]| -> Result<Comparison, DecodeError> {
        let o = stream
            .clone_dtoh(&out.o)
            .map_err(driver("reading o back"))?;
        let lse = stream
            .clone_dtoh(&out.lse)
            .map_err(driver("reading lse back"))?;
        Ok(compare_varlen(plan, &inputs.reference, mask, cu, &o, &lse))
    };
    poison(&stream, &mut out)?;
    captured.launch_masked(plan, &tensors, device_mask.as_ref(), &mut out, &mut ws)?;
    results.push(read_back(&out, first)?);
    let pointers = {
        let (q, _a) = tensors.q.device_ptr(&stream);
        let (k, _b) = tensors.k.device_ptr(&stream);
        let (v, _c) = tensors.v.device_ptr(&stream);
        let (block_table, _d) = tensors.block_table.device_ptr(&stream);
        let seqlens = tensors.seqlens_k.as_ref().map(|l| l.device_ptr(&stream));
        let cu = tensors.cu_seqlens_q.as_ref().map(|l| l.device_ptr(&stream));
        let (o, _f) = out.o.device_ptr_mut(&stream);
        let (lse, _g) = out.lse.device_ptr_mut(&stream);
        let (ws_o, _h) = ws.o.device_ptr_mut(&stream);
        let (ws_lse, _i) = ws.lse.device_ptr_mut(&stream);
        let m = device_mask.as_ref().map(|m| {
            (
                m.list.device_ptr(&stream),
                m.count.device_ptr(&stream),
                m.bits.device_ptr(&stream),
            )
        });
        DecodePointers {
            q,
            k,
            v,
            o,
            lse,
            ws_o,
            ws_lse,
            seqlens_k: seqlens.as_ref().map_or(0, |(p, _)| *p),
            block_table,
            cu_seqlens_q: cu.as_ref().map_or(0, |(p, _)| *p),
            mask_list: m.as_ref().map_or(0, |x| x.0 .0),
            mask_count: m.as_ref().map_or(0, |x| x.1 .0),
            mask_bits: m.as_ref().map_or(0, |x| x.2 .0),
        }
    };
    stream
        .synchronize()
        .map_err(driver("synchronising before capture"))?;
    stream
        .begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(driver("beginning a graph capture"))?;
    // SAFETY: the pointers address `tensors`, `out`, `ws` and the mask, all sized for
    // `plan` (upload_varlen, for_plan, DecodeWorkspace::new) and alive past every replay.
    let launched = unsafe { captured.launch_raw(plan, &pointers) };
    let graph = stream
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .map_err(driver("ending the graph capture"))?;
    launched?;
    let graph = graph.ok_or_else(|| {
        DecodeError::Gpu(fragmask_host::Error::InvalidArgument(
            "the graph capture recorded nothing".into(),
        ))
    })?;
    for cu in cu_list {
        if let Some(dev) = tensors.cu_seqlens_q.as_mut() {
            stream
                .memcpy_htod(cu.as_slice(), dev)
                .map_err(driver("writing cu_seqlens_q"))?;
        }
        poison(&stream, &mut out)?;
        graph
            .launch()
            .map_err(driver("replaying the decode graph"))?;
        results.push(read_back(&out, cu)?);
    }
    Ok(results)
}

/// One decode step captured in a CUDA graph with the lengths of `inputs`, then replayed
/// with each of `lengths` written into the same device `seqlens_k` (outputs poisoned
/// before each replay), each replay compared with the reference at its lengths.
pub fn graph_check(
    runner: &DecodeRunner,
    plan: &DecodePlan,
    inputs: &HostInputs,
    lengths: &[Vec<i32>],
) -> Result<Vec<Comparison>, DecodeError> {
    let shape = plan.shape;
    let context = runner.stream().context().clone();
    let stream = context
        .new_stream()
        .map_err(driver("creating the capture stream"))?;
    let captured = runner.with_stream(stream.clone());
    let tensors = DecodeTensors::upload(
        &stream,
        &shape,
        &inputs.q,
        &inputs.k,
        &inputs.v,
        inputs.block_table(),
        inputs.seqlens_k(),
    )?;
    let mut seqlens = match &tensors.seqlens_k {
        Some(_) => stream
            .clone_htod(inputs.seqlens_k().unwrap_or(&[]))
            .map_err(driver("uploading seqlens_k"))?,
        None => {
            return Err(DecodeError::Gpu(fragmask_host::Error::InvalidArgument(
                "the graph check needs device lengths".into(),
            )))
        }
    };
    let mut out = DecodeOutput::new(&stream, &shape)?;
    let mut ws = DecodeWorkspace::new(&stream, plan)?;
    let pointers = {
        let (q, _a) = tensors.q.device_ptr(&stream);
        let (k, _b) = tensors.k.device_ptr(&stream);
        let (v, _c) = tensors.v.device_ptr(&stream);
        let (block_table, _d) = tensors.block_table.device_ptr(&stream);
        let (seqlens_k, _e) = seqlens.device_ptr_mut(&stream);
        let (o, _f) = out.o.device_ptr_mut(&stream);
        let (lse, _g) = out.lse.device_ptr_mut(&stream);
        let (ws_o, _h) = ws.o.device_ptr_mut(&stream);
        let (ws_lse, _i) = ws.lse.device_ptr_mut(&stream);
        DecodePointers {
            q,
            k,
            v,
            o,
            lse,
            ws_o,
            ws_lse,
            seqlens_k,
            block_table,
            ..Default::default()
        }
    };
    stream
        .synchronize()
        .map_err(driver("synchronising before capture"))?;
    stream
        .begin_capture(
            cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .map_err(driver("beginning a graph capture"))?;
    // SAFETY: every pointer addresses a live buffer of the plan's size (upload and the
    // allocations above checked or sized them), alive until the function returns, after
    // the last replay has been synchronised.
    let launched = unsafe { captured.launch_raw(plan, &pointers) };
    let graph = stream
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .map_err(driver("ending the graph capture"));
    launched?;
    let graph = graph?.ok_or_else(|| {
        DecodeError::Gpu(fragmask_host::Error::InvalidArgument(
            "the graph capture recorded nothing".into(),
        ))
    })?;
    let mut results = Vec::with_capacity(lengths.len());
    for lens in lengths {
        shape.check_lengths(Some(lens), inputs.block_table())?;
        stream
            .memcpy_htod(lens, &mut seqlens)
            .map_err(driver("writing seqlens_k"))?;
        poison(&stream, &mut out)?;
        graph
            .launch()
            .map_err(driver("replaying the decode graph"))?;
        let o = stream
            .clone_dtoh(&out.o)
            .map_err(driver("reading o back"))?;
        let lse = stream
            .clone_dtoh(&out.lse)
            .map_err(driver("reading lse back"))?;
        let mut reference = inputs.reference.clone();
        reference.seqlens_k = Some(lens.clone());
        results.push(compare(&shape, &reference, &o, &lse));
    }
    Ok(results)
}

/// One case of [`sweep_cases`].
#[derive(Clone, Debug)]
pub struct SweepCase {
    /// What the case exercises.
    pub label: String,
    /// The shape.
    pub shape: DecodeShape,
    /// Hand out pages in random order.
    pub shuffle_pages: bool,
    /// Lengths (`None`: [`random_lengths`]).
    pub lengths: Option<Vec<i32>>,
    /// Split count (`None`: planned).
    pub splits: Option<usize>,
    /// A random block-sparse mask ([`super::masks::random_packed_mask`]).
    pub mask: Option<SweepMask>,
}

/// The random mask of a masked [`SweepCase`].
#[derive(Clone, Copy, Debug)]
pub struct SweepMask {
    /// Tokens per row block.
    pub block_m: u32,
    /// Keys per block.
    pub block_n: u32,
    /// Heads stored: 1 (broadcast) or H (per head).
    pub heads: usize,
}

impl SweepCase {
    /// The case's packed mask, from `seed` (`None` when unmasked).
    pub fn packed_mask(&self, seed: u64) -> Result<Option<DecodeMask>, DecodeError> {
        self.mask
            .map(|m| {
                let packed = super::masks::random_packed_mask(
                    self.shape.seqlen_q,
                    self.shape.cache.capacity(),
                    m.heads,
                    m.block_m,
                    m.block_n,
                    seed,
                )?;
                let mask = DecodeMask::from_packed(&packed)?;
                mask.fit(&self.shape)?;
                Ok(mask)
            })
            .transpose()
    }
}

/// The correctness sweep of issue 11: every page size, head size and GQA ratio (1, 4,
/// 8 and MQA), split counts from 1 to the maximum, odd lengths, requests with no key,
/// several new tokens per request (causal, several m-blocks), sliding windows, fp16.
pub fn sweep_cases() -> Vec<SweepCase> {
    let base = DecodeShape {
        batch: 3,
        seqlen_q: 1,
        heads: 32,
        kv_heads: 8,
        head_dim: 128,
        dtype: ActDtype::Bf16,
        cache: CacheShape::Contiguous { capacity: 1001 },
        window_left: None,
        window_right: None,
        softmax_scale: None,
    };
    let paged = |shape: DecodeShape, page_size: usize| {
        let keys = shape.cache.capacity();
        DecodeShape {
            cache: CacheShape::Paged {
                page_size,
                num_pages: shape.batch * keys.div_ceil(page_size) + 3,
                max_pages: keys.div_ceil(page_size),
            },
            ..shape
        }
    };
    let case = |label: String, shape: DecodeShape| SweepCase {
        label,
        shape,
        shuffle_pages: true,
        lengths: None,
        splits: None,
        mask: None,
    };
    let mut cases = Vec::new();
    for page in [None, Some(1), Some(16), Some(64), Some(256)] {
        for d in [64, 128, 256] {
            let s = DecodeShape {
                head_dim: d,
                ..base
            };
            let s = page.map_or(s, |p| paged(s, p));
            cases.push(case(format!("page {page:?} D={d}"), s));
        }
    }
    for (h, hkv) in [(8, 8), (16, 4), (64, 8), (8, 1)] {
        cases.push(case(
            format!("GQA {h}/{hkv} paged 16"),
            paged(
                DecodeShape {
                    heads: h,
                    kv_heads: hkv,
                    ..base
                },
                16,
            ),
        ));
    }
    let long = DecodeShape {
        batch: 2,
        cache: CacheShape::Contiguous { capacity: 2047 },
        ..base
    };
    for splits in [1, 2, 3, 5, 8, 17, 64] {
        cases.push(SweepCase {
            splits: Some(splits),
            ..case(format!("splits {splits}, Sk=2047"), paged(long, 64))
        });
    }
    for sq in [2, 5, 16, 33] {
        cases.push(case(
            format!("Sq={sq} causal"),
            paged(
                DecodeShape {
                    seqlen_q: sq,
                    heads: 16,
                    kv_heads: 4,
                    window_right: Some(0),
                    ..base
                },
                16,
            ),
        ));
    }
    cases.push(SweepCase {
        lengths: Some(vec![2, 0, 1]),
        ..case(
            "Sq=4 causal, lengths 2/0/1: rows with no key".into(),
            DecodeShape {
                seqlen_q: 4,
                heads: 8,
                kv_heads: 2,
                window_right: Some(0),
                ..base
            },
        )
    });
    for (left, right) in [
        (Some(100), Some(0)),
        (Some(0), Some(0)),
        (Some(50), None),
        (Some(7), Some(3)),
    ] {
        cases.push(case(
            format!("Sq=3 window ({left:?}, {right:?})"),
            paged(
                DecodeShape {
                    seqlen_q: 3,
                    window_left: left,
                    window_right: right,
                    ..base
                },
                16,
            ),
        ));
    }
    for page in [None, Some(16)] {
        let s = DecodeShape {
            dtype: ActDtype::F16,
            ..base
        };
        cases.push(case(
            format!("f16 page {page:?}"),
            page.map_or(s, |p| paged(s, p)),
        ));
    }
    cases.push(SweepCase {
        lengths: Some(vec![1001, 1001, 1001]),
        shuffle_pages: false,
        ..case("full lengths, pages in order".into(), paged(base, 16))
    });
    // Shared-K/V CTAs (64 packed rows) without a mask: D = 256 and 64, G = 1.
    for (d, sq, window) in [(256, 64, (None, Some(0))), (64, 50, (Some(300), Some(2)))] {
        cases.push(SweepCase {
            splits: Some(5),
            ..case(
                format!("shared K/V D={d} Sq={sq} window {window:?}"),
                DecodeShape {
                    seqlen_q: sq,
                    heads: 4,
                    kv_heads: 4,
                    head_dim: d,
                    window_left: window.0,
                    window_right: window.1,
                    ..base
                },
            )
        });
    }
    // Block-sparse masks: 64-row shared-K/V CTAs (write-up 002's shape in small), one
    // shared-K/V warp at D = 256, 16-row CTAs, per-head masks with GQA (heads not
    // packed), lists past the staged LIST_CAP entries, causal on top, 1 and many splits.
    let masked = |label: &str,
                  shape: DecodeShape,
                  (block_m, block_n, heads): (u32, u32, usize),
                  splits: Option<usize>| SweepCase {
        splits,
        mask: Some(SweepMask {
            block_m,
            block_n,
            heads,
        }),
        ..case(
            format!("mask {block_m}x{block_n} x{heads} heads: {label}"),
            shape,
        )
    };
    let g1 = DecodeShape {
        seqlen_q: 64,
        heads: 4,
        kv_heads: 4,
        ..base
    };
    cases.push(masked("Sq=64 G=1, shared K/V", g1, (64, 64, 1), None));
    // Both sides of the cluster merge's limit (docs/decode.md, "Cluster merge"): 16
    // splits merge in one cluster, 17 through the workspace and the combine kernel.
    for splits in [16, 17] {
        cases.push(masked(
            &format!("Sq=64 G=1, shared K/V, {splits} splits, Sk=3000"),
            DecodeShape {
                cache: CacheShape::Contiguous { capacity: 3000 },
                ..g1
            },
            (64, 64, 1),
            Some(splits),
        ));
    }
    cases.push(masked(
        "Sq=64 G=1 per head, paged 16, causal, 3 splits",
        paged(
            DecodeShape {
                window_right: Some(0),
                ..g1
            },
            16,
        ),
        (64, 64, 4),
        Some(3),
    ));
    cases.push(masked(
        "Sq=64 G=1 D=256 fp16, 1 split",
        DecodeShape {
            head_dim: 256,
            dtype: ActDtype::F16,
            ..g1
        },
        (64, 128, 1),
        Some(1),
    ));
    cases.push(masked(
        "Sq=40 G=2 D=64, 64 splits",
        DecodeShape {
            seqlen_q: 40,
            heads: 8,
            kv_heads: 4,
            head_dim: 64,
            ..base
        },
        (128, 128, 1),
        Some(64),
    ));
    cases.push(masked(
        "q=1 G=4 D=256 (one shared-K/V warp), paged 1",
        paged(
            DecodeShape {
                heads: 16,
                kv_heads: 4,
                head_dim: 256,
                ..base
            },
            1,
        ),
        (64, 64, 1),
        None,
    ));
    cases.push(masked(
        "Sq=5 G=4 per head (not packed), 16-row CTAs",
        DecodeShape {
            seqlen_q: 5,
            heads: 16,
            kv_heads: 4,
            ..base
        },
        (64, 64, 16),
        None,
    ));
    cases.push(masked(
        "Sq=64 G=2 per head (not packed), shared K/V, paged 64",
        paged(
            DecodeShape {
                seqlen_q: 64,
                heads: 4,
                kv_heads: 2,
                ..base
            },
            64,
        ),
        (64, 64, 4),
        Some(2),
    ));
    cases.push(masked(
        "Sq=3 G=2 D=256 per head, causal",
        DecodeShape {
            seqlen_q: 3,
            heads: 4,
            kv_heads: 2,
            head_dim: 256,
            window_right: Some(0),
            ..base
        },
        (64, 64, 4),
        Some(2),
    ));
    cases.push(masked(
        "Sq=64 G=1, 16-key blocks past the staged list, 1 split",
        DecodeShape {
            batch: 1,
            seqlen_q: 64,
            heads: 2,
            kv_heads: 2,
            cache: CacheShape::Contiguous { capacity: 8192 },
            ..base
        },
        (64, 16, 1),
        Some(1),
    ));
    // Head-major caches [B, Hkv, Sk, D]: 16-row CTAs with GQA and splits, shared K/V
    // with a mask (write-up 002's order), per-head masks with GQA.
    let head_major = |shape: DecodeShape| DecodeShape {
        cache: CacheShape::HeadMajor {
            capacity: shape.cache.capacity(),
        },
        ..shape
    };
    cases.push(SweepCase {
        splits: Some(3),
        ..case("head-major GQA 32/8, 3 splits".into(), head_major(base))
    });
    cases.push(masked(
        "Sq=64 G=1 head-major, shared K/V",
        head_major(g1),
        (64, 64, 1),
        None,
    ));
    cases.push(masked(
        "Sq=5 G=4 per head, head-major, causal",
        head_major(DecodeShape {
            seqlen_q: 5,
            heads: 16,
            kv_heads: 4,
            window_right: Some(0),
            ..base
        }),
        (64, 64, 16),
        Some(2),
    ));
    cases
}
