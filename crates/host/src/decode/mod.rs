//! Split-KV decode on the GPU: plan, upload and launch. The CPU f64 reference, the
//! LSE merge of partial results (`merge_states`), the checks against them and the
//! benchmark are in `fragmask-check` (`fragmask_check::decode`).
//!
//! - [`problem`]: [`DecodeShape`], [`DecodePlan`] and the typed [`DecodeError`]; every
//!   check (head ratio, head size, page size, lengths above capacity, block table entries
//!   past the pool) runs before anything is allocated or launched.
//! - [`DecodeRunner`]: compiles `fragmask_kernels::decode` for one geometry and launches
//!   the split kernel, then (with more than one split) the combine kernel, on one stream.
//!   Nothing on the launch path allocates or synchronises: the split count is fixed by
//!   the plan (from a capacity) and the per-request key ranges come from `seqlens_k` on
//!   the device, so a launch captured in a CUDA graph replays right at any length.
//!
//! ```no_run
//! use fragmask_host::decode::{CacheShape, DecodeOutput, DecodeRunner, DecodeShape, DecodeTensors, DecodeWorkspace};
//! use fragmask_host::{Compiler, Device};
//! use fragmask_kernels::family::dtype::ActDtype;
//! # fn main() -> Result<(), fragmask_host::decode::DecodeError> {
//! let shape = DecodeShape { batch: 16, seqlen_q: 1, heads: 32, kv_heads: 8, head_dim: 128,
//!     dtype: ActDtype::Bf16, cache: CacheShape::Contiguous { capacity: 8192 },
//!     window_left: None, window_right: Some(0), softmax_scale: None };
//! let device = Device::first()?;
//! let runner = DecodeRunner::for_shape(&device, &Compiler::new(), &shape)?;
//! let plan = runner.plan(shape, 8192, None)?;
//! # let (q, k, v) = (vec![0u8; 0], vec![0u8; 0], vec![0u8; 0]);
//! let tensors = DecodeTensors::upload(runner.stream(), &shape, &q, &k, &v, &[], Some(&[8192; 16]))?;
//! let mut out = DecodeOutput::new(runner.stream(), &shape)?;
//! let mut workspace = DecodeWorkspace::new(runner.stream(), &plan)?;
//! runner.launch(&plan, &tensors, &mut out, &mut workspace)?;
//! # Ok(()) }
//! ```

pub mod mask;
pub mod problem;

use std::sync::Arc;

use cudarc::driver::{
    sys, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr,
};
use fragmask_kernels::decode::{
    source, DecodeConfig, DecodeParams, COMBINE_KERNEL, COMBINE_THREADS, SPLIT_KERNEL,
};
use fragmask_kernels::family::combine::rows_per_cta;

pub use mask::{DecodeMask, DecodeMaskDevice, MaskGeometry};
pub use problem::{CacheShape, DecodeError, DecodePlan, DecodeShape};

use crate::device::{multiprocessors, Device};
use crate::error::Error;
use crate::launch::{KernelArg, Launch};
use crate::module_cache::compile_and_load;
use crate::nvrtc::{CompileOptions, Compiler};

/// The geometry of a masked call: the shape's D, dtype and cache, the mask's tile width,
/// and shared-K/V CTAs when [`DecodeMask::fit`] chose them.
pub fn masked_config(
    shape: &DecodeShape,
    geometry: &MaskGeometry,
) -> Result<DecodeConfig, DecodeError> {
    let c = shape
        .base_config()?
        .with_mask_block_n(geometry.block_n)
        .map_err(DecodeError::Config)?;
    if geometry.shared_warps > 0 {
        c.with_shared_kv_warps(geometry.shared_warps)
            .map_err(DecodeError::Config)
    } else {
        Ok(c)
    }
}

/// The kernels' parameters of one call of `plan` on `ptrs` (mask geometry `mask`; a
/// dummy one when unmasked): strides of `[B, Sq, H, D]` (varlen `[total_q, H, D]`) q and
/// o, the cache's strides, the grid's heads and packed rows.
fn decode_params(plan: &DecodePlan, ptrs: &DecodePointers, mask: &MaskGeometry) -> DecodeParams {
    let s = &plan.shape;
    let (b, sq, h, hk, d) = (
        s.batch as i64,
        s.seqlen_q as i64,
        s.heads as i64,
        s.kv_heads as i64,
        s.head_dim as i64,
    );
    // (batch or page, key, KV head) strides of k and v.
    let (kv_stride_batch, kv_stride_key, kv_stride_head, num_pages, table_stride) = match s.cache {
        CacheShape::Contiguous { capacity } => (capacity as i64 * hk * d, hk * d, d, 0, 0),
        CacheShape::HeadMajor { capacity } => {
            (capacity as i64 * hk * d, d, capacity as i64 * d, 0, 0)
        }
        CacheShape::Paged {
            page_size,
            num_pages,
            max_pages,
        } => (
            page_size as i64 * hk * d,
            hk * d,
            d,
            num_pages as i32,
            max_pages as i64,
        ),
    };
    // A window of at least the capacity sees every key (and keeps the kernel's
    // position sums within int): it is passed as unlimited.
    let capacity = s.cache.capacity();
    let window = |w: Option<usize>| w.filter(|&w| w < capacity).map_or(-1, |w| w as i32);
    DecodeParams {
        q: ptrs.q,
        k: ptrs.k,
        v: ptrs.v,
        o: ptrs.o,
        lse: ptrs.lse,
        ws_o: ptrs.ws_o,
        ws_lse: ptrs.ws_lse,
        seqlens_k: ptrs.seqlens_k,
        block_table: ptrs.block_table,
        cu_seqlens_q: ptrs.cu_seqlens_q,
        mask_list: ptrs.mask_list,
        mask_count: ptrs.mask_count,
        mask_bits: ptrs.mask_bits,
        // [B, Sq, H, D], or varlen [total_q, H, D] (no batch stride: cu_seqlens_q
        // gives the request's first row); lse [B, H, Sq] or [H, total_q].
        q_stride_batch: if plan.total_q.is_some() {
            0
        } else {
            sq * h * d
        },
        q_stride_token: h * d,
        q_stride_head: d,
        o_stride_batch: if plan.total_q.is_some() {
            0
        } else {
            sq * h * d
        },
        o_stride_token: h * d,
        o_stride_head: d,
        lse_stride_batch: if plan.total_q.is_some() { 0 } else { h * sq },
        lse_stride_head: plan.total_q.map_or(sq, |t| t as i64),
        kv_stride_batch,
        kv_stride_key,
        kv_stride_head,
        block_table_stride: table_stride,
        batch: b as i32,
        seqlen_q: sq as i32,
        total_q: plan
            .total_q
            .map_or(b * sq, |t| t as i64)
            .min(i32::MAX as i64) as i32,
        heads: h as i32,
        // Packed: (Hkv, G); per-head masks with G > 1: H grid heads of one row each.
        kv_heads: plan.grid_heads() as i32,
        group: plan.row_group() as i32,
        capacity_k: capacity as i32,
        num_pages,
        window_left: window(s.window_left),
        window_right: window(s.window_right),
        num_splits: plan.num_splits as i32,
        m_blocks: plan.m_blocks() as i32,
        m_pad: plan.m_pad() as i32,
        scale_log2: (s.scale() * std::f64::consts::LOG2_E) as f32,
        mask_batch_stride: mask.batch_stride,
        mask_head_stride: mask.head_stride,
        mask_block_m: mask.block_m,
        mask_n_blocks: mask.n_blocks,
        // K and V's head is the grid head / kv_head_div: 1 when the G query heads
        // of a KV head are packed rows, G when each query head has its own CTAs.
        kv_head_div: (plan.grid_heads() / s.kv_heads) as i32,
        cluster_merge: i32::from(plan.cluster_merge()),
    }
}

/// The parameter struct passed by value (`const __grid_constant__ FmDecodeParams`):
/// `#[repr(C)]` plain data whose offsets and size equal the CUDA struct's (the kernels
/// crate's test compares `offset_of!` with the C rules; NVRTC static_asserts them).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct ParamsArg(DecodeParams);

// SAFETY: as above: a by-value kernel argument of exactly the kernel's layout.
unsafe impl DeviceRepr for ParamsArg {}

/// A driver failure while `context`, as [`DecodeError::Gpu`] (for `map_err`).
pub fn driver(context: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> DecodeError {
    move |e| DecodeError::Gpu(Error::driver(context)(e))
}

/// Device inputs of one decode call, contiguous (activations as raw bytes of the dtype).
#[derive(Debug)]
pub struct DecodeTensors {
    /// q `[B, Sq, H, D]`.
    pub q: CudaSlice<u8>,
    /// k `[B, capacity, Hkv, D]` or `[num_pages, page_size, Hkv, D]`.
    pub k: CudaSlice<u8>,
    /// v, as k.
    pub v: CudaSlice<u8>,
    /// `[B, max_pages]` (one unused entry when contiguous).
    pub block_table: CudaSlice<i32>,
    /// `[B]`, or `None`: every request at capacity.
    pub seqlens_k: Option<CudaSlice<i32>>,
    /// `[B + 1]` token offsets of variable query lengths (plans with `total_q`).
    pub cu_seqlens_q: Option<CudaSlice<i32>>,
}

impl DecodeTensors {
    /// Checks the host inputs against `shape` (sizes, lengths within capacity, block
    /// table entries within the pool), then uploads them on `stream`.
    pub fn upload(
        stream: &Arc<CudaStream>,
        shape: &DecodeShape,
        q: &[u8],
        k: &[u8],
        v: &[u8],
        block_table: &[i32],
        seqlens_k: Option<&[i32]>,
    ) -> Result<Self, DecodeError> {
        let shape = shape.validate()?;
        let e = shape.dtype.size();
        for (tensor, got, t) in [
            ("q", q.len(), "q"),
            ("k", k.len(), "k"),
            ("v", v.len(), "v"),
        ] {
            let expected = shape.elements(t)? * e;
            if got != expected {
                return Err(DecodeError::Shape {
                    tensor,
                    got,
                    expected,
                });
            }
        }
        shape.check_lengths(seqlens_k, block_table)?;
        let up = |bytes: &[u8]| {
            stream
                .clone_htod(bytes)
                .map_err(driver("uploading decode inputs"))
        };
        let table: Vec<i32> = if block_table.is_empty() {
            vec![0]
        } else {
            block_table.to_vec()
        };
        Ok(Self {
            q: up(q)?,
            k: up(k)?,
            v: up(v)?,
            block_table: stream
                .clone_htod(&table)
                .map_err(driver("uploading the block table"))?,
            seqlens_k: seqlens_k
                .map(|l| stream.clone_htod(l).map_err(driver("uploading seqlens_k")))
                .transpose()?,
            cu_seqlens_q: None,
        })
    }

    /// [`Self::upload`] for a plan with variable query lengths: q is `[total_q, H, D]`
    /// and `cu_seqlens_q` (`[B + 1]`, checked by [`DecodePlan::check_cu_seqlens_q`])
    /// gives each request's rows.
    #[allow(clippy::too_many_arguments)]
    pub fn upload_varlen(
        stream: &Arc<CudaStream>,
        plan: &DecodePlan,
        q: &[u8],
        k: &[u8],
        v: &[u8],
        block_table: &[i32],
        seqlens_k: Option<&[i32]>,
        cu_seqlens_q: &[i32],
    ) -> Result<Self, DecodeError> {
        let shape = plan.shape;
        let expected = plan.elements("q")? * shape.dtype.size();
        if q.len() != expected {
            return Err(DecodeError::Shape {
                tensor: "q",
                got: q.len(),
                expected,
            });
        }
        plan.check_cu_seqlens_q(cu_seqlens_q)?;
        // k, v, lengths and block table as a fixed-length call; q is checked above.
        let mut fixed = shape;
        fixed.seqlen_q = 1;
        let dummy_q = vec![0u8; fixed.elements("q")? * shape.dtype.size()];
        let mut t = Self::upload(stream, &fixed, &dummy_q, k, v, block_table, seqlens_k)?;
        t.q = stream
            .clone_htod(q)
            .map_err(driver("uploading decode inputs"))?;
        t.cu_seqlens_q = Some(
            stream
                .clone_htod(cu_seqlens_q)
                .map_err(driver("uploading cu_seqlens_q"))?,
        );
        Ok(t)
    }
}

/// Device outputs: o `[B, Sq, H, D]` (dtype bytes) and lse `[B, H, Sq]` fp32.
#[derive(Debug)]
pub struct DecodeOutput {
    /// o.
    pub o: CudaSlice<u8>,
    /// lse (natural log; −∞ for a row with no visible key).
    pub lse: CudaSlice<f32>,
}

impl DecodeOutput {
    /// Zeroed outputs for `plan` (varlen plans: o `[total_q, H, D]`, lse `[H, total_q]`).
    pub fn for_plan(stream: &Arc<CudaStream>, plan: &DecodePlan) -> Result<Self, DecodeError> {
        let o = plan.elements("o")? * plan.shape.dtype.size();
        Ok(Self {
            o: stream.alloc_zeros(o).map_err(driver("allocating o"))?,
            lse: stream
                .alloc_zeros(plan.elements("lse")?)
                .map_err(driver("allocating lse"))?,
        })
    }

    /// Zeroed outputs for `shape`.
    pub fn new(stream: &Arc<CudaStream>, shape: &DecodeShape) -> Result<Self, DecodeError> {
        let o = shape.elements("o")? * shape.dtype.size();
        Ok(Self {
            o: stream.alloc_zeros(o).map_err(driver("allocating o"))?,
            lse: stream
                .alloc_zeros(shape.elements("lse")?)
                .map_err(driver("allocating lse"))?,
        })
    }
}

/// The split-KV workspace of a plan (fp32 partial o and lse), preallocated once.
#[derive(Debug)]
pub struct DecodeWorkspace {
    /// Partial o `[splits, B, Hkv, m_pad, D]`.
    pub o: CudaSlice<f32>,
    /// Partial lse `[splits, B, Hkv, m_pad]`.
    pub lse: CudaSlice<f32>,
}

impl DecodeWorkspace {
    /// The workspace `plan` needs (one float each when it has one split).
    pub fn new(stream: &Arc<CudaStream>, plan: &DecodePlan) -> Result<Self, DecodeError> {
        let (o, lse) = plan.workspace_floats()?;
        Ok(Self {
            o: stream
                .alloc_zeros(o.max(1))
                .map_err(driver("allocating the decode workspace"))?,
            lse: stream
                .alloc_zeros(lse.max(1))
                .map_err(driver("allocating the decode workspace"))?,
        })
    }
}

/// Raw device addresses of one call's tensors (contiguous, as [`DecodeShape::dims`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodePointers {
    /// q.
    pub q: u64,
    /// k.
    pub k: u64,
    /// v.
    pub v: u64,
    /// o.
    pub o: u64,
    /// lse (0: not written).
    pub lse: u64,
    /// Partial o (unused with one split).
    pub ws_o: u64,
    /// Partial lse.
    pub ws_lse: u64,
    /// `[B]` int32 key counts (0: every request at capacity).
    pub seqlens_k: u64,
    /// `[B, max_pages]` int32 (paged).
    pub block_table: u64,
    /// The mask's list pairs ([`DecodeMaskDevice::list`]; masked runners only).
    pub mask_list: u64,
    /// The mask's counts.
    pub mask_count: u64,
    /// The mask's partial-block bits.
    pub mask_bits: u64,
    /// `[B + 1]` int32 query offsets (plans with `total_q`; 0 otherwise).
    pub cu_seqlens_q: u64,
}

/// The compiled decode kernels of one geometry on one stream.
#[derive(Debug)]
pub struct DecodeRunner {
    stream: Arc<CudaStream>,
    config: DecodeConfig,
    split: CudaFunction,
    combine: CudaFunction,
    multiprocessors: usize,
    dependent_launch: bool,
}

impl DecodeRunner {
    /// Compiles (through the on-disk cache) and loads `config` on `device`'s default stream.
    pub fn new(
        device: &Device,
        compiler: &Compiler,
        config: DecodeConfig,
    ) -> Result<Self, DecodeError> {
        let config = config.validate().map_err(DecodeError::Config)?;
        let src = source::source(config).map_err(DecodeError::Config)?;
        let module = compile_and_load(
            device.context(),
            compiler,
            &src,
            &CompileOptions::new(device.arch()),
            &[SPLIT_KERNEL, COMBINE_KERNEL],
            |m| {
                m.allow_dynamic_shared_memory(SPLIT_KERNEL, config.smem_bytes())?;
                if config.shared_kv && fragmask_kernels::decode::CLUSTER_MERGE {
                    // Clusters of up to 16 split CTAs (above the portable 8).
                    m.function(SPLIT_KERNEL)?
                        .set_attribute(
                            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                            1,
                        )
                        .map_err(Error::driver("allowing the decode kernel clusters of 16"))?;
                }
                Ok(())
            },
        )?;
        let split = module.function(SPLIT_KERNEL)?;
        let combine = module.function(COMBINE_KERNEL)?;
        Ok(Self {
            stream: device.default_stream(),
            config,
            split,
            combine,
            multiprocessors: multiprocessors(device)?,
            dependent_launch: true,
        })
    }

    /// The runner of `shape`'s geometry walking the block lists of `mask` (checked
    /// against `shape` first, [`DecodeMask::fit`]).
    pub fn for_shape_masked(
        device: &Device,
        compiler: &Compiler,
        shape: &DecodeShape,
        mask: &DecodeMask,
    ) -> Result<Self, DecodeError> {
        let shape = shape.validate()?;
        let geometry = mask.fit(&shape)?;
        Self::new(device, compiler, masked_config(&shape, &geometry)?)
    }

    /// The runner of `shape`'s geometry.
    pub fn for_shape(
        device: &Device,
        compiler: &Compiler,
        shape: &DecodeShape,
    ) -> Result<Self, DecodeError> {
        let config = shape.validate()?.config()?;
        Self::new(device, compiler, config)
    }

    /// The same kernels launching on `stream` (a non-default stream can be captured).
    pub fn with_stream(&self, stream: Arc<CudaStream>) -> Self {
        Self {
            stream,
            config: self.config,
            split: self.split.clone(),
            combine: self.combine.clone(),
            multiprocessors: self.multiprocessors,
            dependent_launch: self.dependent_launch,
        }
    }

    /// Launches with programmatic dependent launch (the default) or plainly.
    pub fn with_dependent_launch(mut self, on: bool) -> Self {
        self.dependent_launch = on;
        self
    }

    /// The stream launches go to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The compiled geometry.
    pub fn config(&self) -> DecodeConfig {
        self.config
    }

    /// SMs of the device.
    pub fn multiprocessors(&self) -> usize {
        self.multiprocessors
    }

    /// Plans `shape` (which must match this runner's geometry) for requests of at most
    /// `max_seqlen_k` keys.
    pub fn plan(
        &self,
        shape: DecodeShape,
        max_seqlen_k: usize,
        splits: Option<usize>,
    ) -> Result<DecodePlan, DecodeError> {
        let plan = DecodePlan::new(shape, max_seqlen_k, self.multiprocessors, splits)?;
        if plan.config != self.config {
            return Err(DecodeError::Gpu(Error::InvalidArgument(format!(
                "the shape needs geometry {:?}, this runner holds {:?}",
                plan.config, self.config
            ))));
        }
        Ok(plan)
    }

    /// Plans `shape` under `mask` (a runner from [`Self::for_shape_masked`]): the splits
    /// are sized for the most keys any row block lists, so they divide the visited
    /// blocks, not the capacity.
    pub fn plan_masked(
        &self,
        shape: DecodeShape,
        mask: &DecodeMask,
        splits: Option<usize>,
    ) -> Result<DecodePlan, DecodeError> {
        let shape = shape.validate()?;
        let geometry = mask.fit(&shape)?;
        if geometry.block_n != self.config.mask_block_n {
            return Err(DecodeError::Mask {
                what: "tile",
                detail: format!(
                    "the mask has {}-key blocks, this runner was compiled for {}",
                    geometry.block_n, self.config.mask_block_n
                ),
            });
        }
        let plan = DecodePlan::for_mask(shape, mask, self.multiprocessors, splits)?;
        if plan.config != self.config {
            return Err(DecodeError::Gpu(Error::InvalidArgument(format!(
                "the shape and mask need geometry {:?}, this runner holds {:?}",
                plan.config, self.config
            ))));
        }
        let _ = geometry;
        Ok(plan)
    }

    /// Runs `plan` on device tensors (checked against the plan's shape).
    pub fn launch(
        &self,
        plan: &DecodePlan,
        tensors: &DecodeTensors,
        out: &mut DecodeOutput,
        workspace: &mut DecodeWorkspace,
    ) -> Result<(), DecodeError> {
        self.launch_masked(plan, tensors, None, out, workspace)
    }

    /// [`Self::launch`] with the block-sparse mask a masked runner needs (`None` for an
    /// unmasked one).
    pub fn launch_masked(
        &self,
        plan: &DecodePlan,
        tensors: &DecodeTensors,
        mask: Option<&DecodeMaskDevice>,
        out: &mut DecodeOutput,
        workspace: &mut DecodeWorkspace,
    ) -> Result<(), DecodeError> {
        let s = &plan.shape;
        let e = s.dtype.size();
        let (ws_o, ws_lse) = plan.workspace_floats()?;
        for (tensor, got, expected) in [
            ("q", tensors.q.len(), plan.elements("q")? * e),
            ("k", tensors.k.len(), s.elements("k")? * e),
            ("v", tensors.v.len(), s.elements("v")? * e),
            ("o", out.o.len(), plan.elements("o")? * e),
            ("lse", out.lse.len(), plan.elements("lse")?),
            (
                "cu_seqlens_q",
                tensors.cu_seqlens_q.as_ref().map_or(0, |c| c.len()),
                if plan.total_q.is_some() {
                    s.batch + 1
                } else {
                    0
                },
            ),
            (
                "block_table",
                tensors.block_table.len(),
                s.elements("block_table")?.max(1),
            ),
            (
                "seqlens_k",
                tensors.seqlens_k.as_ref().map_or(s.batch, |l| l.len()),
                s.batch,
            ),
        ] {
            if got != expected {
                return Err(DecodeError::Shape {
                    tensor,
                    got,
                    expected,
                });
            }
        }
        for (have, need) in [(workspace.o.len(), ws_o), (workspace.lse.len(), ws_lse)] {
            if have < need {
                return Err(DecodeError::Workspace { have, need });
            }
        }
        let st = &self.stream;
        let (q, _g1) = tensors.q.device_ptr(st);
        let (k, _g2) = tensors.k.device_ptr(st);
        let (v, _g3) = tensors.v.device_ptr(st);
        let (block_table, _g4) = tensors.block_table.device_ptr(st);
        let seqlens = tensors.seqlens_k.as_ref().map(|l| l.device_ptr(st));
        let cu_q = tensors.cu_seqlens_q.as_ref().map(|l| l.device_ptr(st));
        let (o, _g5) = out.o.device_ptr_mut(st);
        let (lse, _g6) = out.lse.device_ptr_mut(st);
        let (ws_o, _g7) = workspace.o.device_ptr_mut(st);
        let (ws_lse, _g8) = workspace.lse.device_ptr_mut(st);
        let mask_ptrs = mask.map(|m| {
            (
                m.list.device_ptr(st),
                m.count.device_ptr(st),
                m.bits.device_ptr(st),
            )
        });
        let ((mask_list, mask_count, mask_bits), _g9) = match &mask_ptrs {
            Some(((l, _), (c, _), (b, _))) => ((*l, *c, *b), Some(&mask_ptrs)),
            None => ((0, 0, 0), None),
        };
        let pointers = DecodePointers {
            cu_seqlens_q: cu_q.as_ref().map_or(0, |(p, _)| *p),
            mask_list,
            mask_count,
            mask_bits,
            q,
            k,
            v,
            o,
            lse,
            ws_o,
            ws_lse,
            seqlens_k: seqlens.as_ref().map_or(0, |(p, _)| *p),
            block_table,
        };
        // SAFETY: every buffer's size was checked against the plan above; the borrows
        // (and their stream guards) live until the launches are enqueued.
        unsafe { self.launch_raw(plan, &pointers) }
    }

    /// Enqueues the split kernel and, with more than one split, the combine kernel on
    /// [`Self::stream`]: no allocation, no synchronisation (CUDA-graph safe).
    ///
    /// # Safety
    /// Each pointer must address a device allocation of at least its tensor's size in
    /// `plan` ([`DecodeShape::dims`], [`DecodePlan::workspace_floats`]), live until the
    /// kernels complete; `seqlens_k` may be 0 (every request at capacity), `lse` 0 (not
    /// written); o, lse and the workspace must not overlap the inputs.
    pub unsafe fn launch_raw(
        &self,
        plan: &DecodePlan,
        ptrs: &DecodePointers,
    ) -> Result<(), DecodeError> {
        let s = &plan.shape;
        if plan.config != self.config {
            return Err(DecodeError::Gpu(Error::InvalidArgument(
                "the plan was made for another geometry".into(),
            )));
        }
        if plan.total_q.is_some() != (ptrs.cu_seqlens_q != 0) {
            return Err(DecodeError::Gpu(Error::InvalidArgument(
                "a varlen plan (total_q) needs cu_seqlens_q, a fixed-length plan none".into(),
            )));
        }
        let masked = self.config.mask_block_n > 0;
        let mask = match (masked, plan.mask) {
            (false, None) => MaskGeometry::NONE,
            (true, Some(g))
                if ptrs.mask_list != 0 && ptrs.mask_count != 0 && ptrs.mask_bits != 0 =>
            {
                g
            }
            _ => {
                return Err(DecodeError::Mask {
                    what: "launch",
                    detail: "a masked runner needs a plan from plan_masked and the mask's \
                             device buffers; an unmasked one neither"
                        .into(),
                })
            }
        };
        let m_blocks = plan.m_blocks();
        let params = ParamsArg(decode_params(plan, ptrs, &mask));
        let b = s.batch;
        let grid = (
            u32::try_from(plan.num_splits * m_blocks).map_err(|_| DecodeError::Overflow("grid"))?,
            plan.grid_heads() as u32,
            b as u32,
        );
        // Cluster merge: clusters of the num_splits CTAs of one m-block (grid x is
        // m-block-major then), merged in the split kernel; no combine launch.
        let cluster = if plan.cluster_merge() {
            plan.num_splits as u32
        } else {
            1
        };
        let split = Launch::new(grid, self.config.threads())
            .smem(self.config.smem_bytes())
            .clusters(cluster);
        self.enqueue(&self.split, split, &params)?;
        if plan.num_splits > 1 && !plan.cluster_merge() {
            let rows = (s.batch * plan.grid_heads())
                .checked_mul(plan.rows())
                .ok_or(DecodeError::Overflow("combine grid"))?;
            let per_cta = rows_per_cta(COMBINE_THREADS, self.config.head_dim) as usize;
            let ctas = u32::try_from(rows.div_ceil(per_cta))
                .map_err(|_| DecodeError::Overflow("combine grid"))?;
            let combine = Launch::new((ctas, 1, 1), COMBINE_THREADS);
            self.enqueue(&self.combine, combine, &params)?;
        }
        Ok(())
    }

    /// One launch of `func` with the parameter struct in `launch`'s shape, with
    /// programmatic stream serialization when enabled (the kernels wait with
    /// griddepcontrol.wait).
    fn enqueue(
        &self,
        func: &CudaFunction,
        launch: Launch,
        params: &ParamsArg,
    ) -> Result<(), DecodeError> {
        let launch = launch.dependent(self.dependent_launch);
        // SAFETY: both decode kernels take one by-value FmDecodeParams (the ABI test pins
        // the layout, `ParamsArg` is its transparent mirror); the grid is within the limits
        // DecodeShape::validate checked; the pointers inside are the caller's contract
        // (launch_raw).
        unsafe { crate::launch::launch(&self.stream, func, launch, &[KernelArg::new(params)]) }
            .map_err(driver("launching a decode kernel"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::mask::tests::packed_random as random_packed_mask;
    use crate::decode::problem::tests::shape;

    /// For every grid head and packed row: the query head the kernel writes
    /// (`hkv · group + row % group`) reads the K/V head `hkv / kv_head_div`, which must
    /// be that query head's KV head `h / G` (GQA), packed or not.
    fn assert_rows_read_their_kv_head(plan: &DecodePlan, p: &DecodeParams) {
        let g = plan.shape.group();
        for hkv in 0..p.kv_heads {
            for row in 0..p.group {
                let head = hkv * p.group + row % p.group;
                assert_eq!(hkv / p.kv_head_div, head / g as i32, "{p:?}");
            }
        }
    }

    #[test]
    fn params_give_every_query_head_its_own_kv_head_packed_or_not() {
        let s = shape(2, 16, 4, 300);
        let plan = DecodePlan::new(s, 300, 132, Some(1)).unwrap();
        let p = decode_params(&plan, &DecodePointers::default(), &MaskGeometry::NONE);
        assert_eq!((p.kv_heads, p.group, p.kv_head_div), (4, 4, 1));
        assert_rows_read_their_kv_head(&plan, &p);
        // A per-head mask with G = 4: each of the 16 query heads is a grid head.
        let mask = DecodeMask::from_packed(&random_packed_mask(1, 300, 16, 64, 64, 1)).unwrap();
        let plan = DecodePlan::for_mask(s, &mask, 132, Some(2)).unwrap();
        assert!(!plan.pack_heads);
        let p = decode_params(&plan, &DecodePointers::default(), &plan.mask.unwrap());
        assert_eq!((p.kv_heads, p.group, p.kv_head_div), (16, 1, 4));
        assert_rows_read_their_kv_head(&plan, &p);
        // A broadcast mask packs the heads again.
        let bcast = DecodeMask::from_packed(&random_packed_mask(1, 300, 1, 64, 64, 1)).unwrap();
        let plan = DecodePlan::for_mask(s, &bcast, 132, None).unwrap();
        let p = decode_params(&plan, &DecodePointers::default(), &plan.mask.unwrap());
        assert_eq!((p.kv_heads, p.group, p.kv_head_div), (4, 4, 1));
    }
}
