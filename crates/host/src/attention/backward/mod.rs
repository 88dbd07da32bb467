//! The attention backward on SM90: dQ, dK, dV from Q, K, V, O, lse and dO (issue 13,
//! docs/backward.md), host side.
//!
//! ```no_run
//! use fragmask_host::attention::{AttentionOptions, AttentionRunner, Mask};
//! use fragmask_host::attention::backward::BackwardOptions;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = fragmask_host::Device::first()?;
//! let runner = AttentionRunner::new(&device)?;
//! let shape = [1, 16, 4096, 128];
//! let bits = vec![0x3F80u16; shape.iter().product()]; // bf16 1.0
//! let (q, k, v, d_o) = (runner.upload_bf16(&bits, shape)?, runner.upload_bf16(&bits, shape)?,
//!                       runner.upload_bf16(&bits, shape)?, runner.upload_bf16(&bits, shape)?);
//! let fwd = runner.forward(&q, &k, &v, &Mask::causal(), &AttentionOptions::default())?;
//! let grads = runner.backward(&q, &k, &v, &fwd.o, &fwd.lse, &d_o, &Mask::causal(),
//!                             &BackwardOptions::default())?;
//! # let _ = grads; Ok(()) }
//! ```
//!
//! Conventions are the forward's: `[B, H, S, D]` tensors (K, V and dK, dV with `H_kv`
//! heads; dK and dV are summed over the query heads of each group), `lse` the forward's
//! natural-log `[B, H, Sq]` (rows with `-inf` get zero gradients), scale `1/sqrt(D)` unless
//! given. The same [`Mask`] as the forward: a window computed in the kernel, or a
//! [`PackedMask`] that carries the transposed lists (`fragmask pack --transposed`).
//!
//! Three launches on the runner's stream: the preprocess (`Dsum = rowsum(dO ∘ O)`, lse in
//! log2, the f32 dQ accumulator zeroed), the main kernel, the postprocess (dQ cast). The
//! scratch buffers live in a [`BackwardWorkspace`] the caller may keep and reuse: given one,
//! nothing on the launch path allocates.

pub mod key_pairs;
mod plan;
mod resolve;
mod workspace;

pub use plan::{BackwardPlan, BackwardPointers, BackwardStages, SharedRows};
use resolve::{Resolved, Upload};
pub use workspace::BackwardWorkspace;
use workspace::{kv_accum_len, padded_rows};

pub use fragmask_kernels::attention::backward::DqReduce;
// The backward's kernel choice lives with the forward's ([`super::choice`]).
pub use super::choice::{backward_kernel, check_group_slices};

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr};
use fragmask_kernels::attention::backward::{
    BackwardKernel, BackwardMask, KERNEL_NAME, POST_KERNEL_NAME, POST_KV_KERNEL_NAME,
    PRE_KERNEL_NAME, ROW_PAD,
};
use fragmask_kernels::attention::ActDtype;
use fragmask_masks::{PackedMask, TransposedLists};

use super::strides::{bshd_strides, check_output_buffer, check_output_strides, contiguous_strides};
use super::{
    driver, AttentionError, AttentionRunner, AttentionShape, DeviceBlockMask, DeviceTensor, Mask,
    RawTensor, TensorMapArg, Window,
};
use crate::device_lists::{DeviceBlockLists, RawMaskLists};
use crate::module_cache::{self, ContentDigest};
use crate::nvrtc::{Arch, CompileOptions, Compiler};
use crate::ptxas;

/// Options of one backward call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BackwardOptions {
    /// Softmax scale; `None` is `1 / sqrt(D)` (must be the forward's).
    pub scale: Option<f32>,
    /// Order the dQ reductions (bit-identical gradients run to run; see docs/backward.md
    /// for the cost).
    pub deterministic: bool,
    /// Element type of every tensor: bf16 (`None`) or fp16.
    pub dtype: Option<ActDtype>,
    /// Q/dO pipeline stages; `None` is the default (2, or 1 where the dQ reduction leaves
    /// room for one only).
    pub stages: Option<u32>,
    /// How dQ is reduced; `None` is the head dim's default (`BackwardKernel::default_for`:
    /// [`DqReduce::Bulk`], at head dim 256 [`DqReduce::FragmentAtomics`]; the wide step's
    /// is [`DqReduce::FragmentAtomics`], `choice::backward_config`).
    pub dq_reduce: Option<DqReduce>,
    /// Whether a writer warp issues the bulk dQ reductions (`BackwardKernel::with_dq_writer`;
    /// an error where the configuration does not take it); `None` is the default
    /// ([`super::choice::BACKWARD_DQ_WRITER`], where it fits).
    pub dq_writer: Option<bool>,
    /// Whether the deterministic mode's key tiles walk their query tiles by when their dQ
    /// turns are expected to be free (`fragmask_masks::deterministic_walks`, uploaded with
    /// the plan; host-held tile lists whose entries the kernel reads, and the paired key
    /// blocks' table, `key_pairs`); `None` is on where it applies (for the pairs: where it
    /// pays, `key_pairs::walks_pay`), `Some(true)` on (the pairs on every plane),
    /// `Some(false)` ascending (the lists' own order).
    pub deterministic_walks: Option<bool>,
    /// (KV head, batch) planes per section of the window walk's launch order
    /// (`BackwardParams::head_section`; 1: the grid's order); `None` is the default
    /// ([`super::choice::backward_head_section`]). An error with a mask, in the
    /// deterministic mode or with column-split CTAs, which keep the grid's order.
    pub head_section: Option<u32>,
    /// CTAs per key tile that share a GQA group's query heads, adding dK and dV into the
    /// workspace's f32 accumulators (`BackwardKernel::with_group_slices`: a power of two
    /// dividing the group; 1: one CTA walks the whole group); `None` is the default
    /// ([`super::choice::backward_group_slices`]). An error where the kernel does not
    /// take them (masks, the deterministic mode, column-split CTAs).
    pub group_slices: Option<u32>,
    /// Queries per step of the main kernel (`BackwardKernel::with_step_m`: 64, or 128 for
    /// head dim 64's window walk); `None` is the default.
    pub step_m: Option<u32>,
    /// Whether a mask with document boundaries runs the documents grid
    /// ([`BackwardMask::Documents`], [`super::choice::backward_documents`]) rather than
    /// its tile lists; `None` is the default ([`super::choice::BACKWARD_DOCUMENTS_GRID`]).
    pub documents_grid: Option<bool>,
    /// Whether a 64x64 mask's call pairs its key blocks (`BackwardKernel::with_paired_keys`:
    /// two 64-key blocks per CTA walk the union of their transposed lists, from a table
    /// uploaded when the call is resolved); `None` is the default
    /// ([`super::choice::backward_paired_keys`]). `Some(true)` is an error where they do
    /// not run. A raw launch (no upload) never pairs them.
    pub paired_keys: Option<bool>,
    /// Whether a mask's key tiles run largest first (`BackwardParams::tile_order`: the
    /// longest walks start first and the shortest fill the tail; docs/backward.md); `None`
    /// is yes wherever the order is at hand: the transposed lists' own on the device (the
    /// GPU transposer writes it, [`crate::device_lists::RawMaskLists::tile_order`]), or one
    /// computed from the host's lists and uploaded when the call is resolved, where it is
    /// not the index order. Never in the deterministic mode, on the documents grid or with
    /// paired key blocks; `Some(true)` is an error there and where no order is at hand.
    pub tile_order: Option<bool>,
    /// Where the gradients are written when not contiguous `[B, H, S, D]` (e.g. into
    /// `[B, S, H, D]` memory, FlashAttention's layout); `None`: contiguous.
    pub grad_strides: Option<GradStrides>,
}

/// Element strides `[batch, head, row]` of the gradients (the head dim contiguous): dQ's,
/// and dK's and dV's (one layout for both). Each a positive multiple of 8 elements (16
/// bytes), and together mapping no two elements of the shape to one address
/// ([`check_output_strides`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradStrides {
    /// dQ `[B, H, Sq, D]`.
    pub dq: [usize; 3],
    /// dK and dV `[B, Hkv, Sk, D]`.
    pub dkv: [usize; 3],
}

impl GradStrides {
    /// The strides of contiguous `[B, H, Sq, D]` dQ and `[B, Hkv, Sk, D]` dK, dV.
    pub fn contiguous(shape: &AttentionShape) -> Self {
        Self {
            dq: contiguous_strides(shape.q_shape()),
            dkv: contiguous_strides(shape.kv_shape()),
        }
    }

    /// The strides of gradients written into contiguous `[B, S, H, D]` memory (a bshd
    /// caller's, FlashAttention's layout).
    pub fn bshd(shape: &AttentionShape) -> Self {
        Self {
            dq: bshd_strides(shape.q_shape()),
            dkv: bshd_strides(shape.kv_shape()),
        }
    }
}

/// dQ `[B, H, Sq, D]`, dK and dV `[B, H_kv, Sk, D]`, in the element type of the call.
#[derive(Debug)]
pub struct Gradients {
    /// dL/dQ.
    pub dq: DeviceTensor<u16>,
    /// dL/dK.
    pub dk: DeviceTensor<u16>,
    /// dL/dV.
    pub dv: DeviceTensor<u16>,
}

/// The transposed lists of a [`DeviceBlockMask`].
#[derive(Debug)]
pub(crate) struct DeviceTransposed {
    lists: DeviceBlockLists,
    words: CudaSlice<u32>,
    /// [`TransposedLists::tile_order`] of the lists: the main kernel's dispatch order.
    order: CudaSlice<i32>,
}

impl DeviceTransposed {
    /// Uploads `mask`'s transposed lists, if it has them.
    pub(crate) fn upload(
        stream: &Arc<CudaStream>,
        mask: &PackedMask,
    ) -> Result<Option<Self>, AttentionError> {
        let Ok(t) = mask.transposed() else {
            return Ok(None);
        };
        let up = |v: &[i32]| -> Result<CudaSlice<i32>, AttentionError> {
            let v: Vec<i32> = if v.is_empty() { vec![0] } else { v.to_vec() };
            stream
                .clone_htod(&v)
                .map_err(driver("uploading transposed lists"))
        };
        let words: Vec<u32> = if t.words().is_empty() {
            vec![0; 4]
        } else {
            t.words().to_vec()
        };
        let order = t.tile_order();
        Ok(Some(Self {
            order: up(&order)?,
            lists: DeviceBlockLists::upload(stream, t.lists())
                .map_err(driver("uploading transposed lists"))?,
            words: stream
                .clone_htod(&words)
                .map_err(driver("uploading transposed words"))?,
        }))
    }

    /// The lists' device addresses, with their dispatch order
    /// ([`TransposedLists::tile_order`]).
    pub(crate) fn device_lists(&self, stream: &Arc<CudaStream>) -> RawMaskLists {
        RawMaskLists {
            lists: self.lists.raw(stream).0,
            words: self.words.device_ptr(stream).0,
            partial_count: 0,
            tile_order: self.order.device_ptr(stream).0,
        }
    }
}

/// A backward mask whose lists live on the device already.
#[derive(Debug, Clone, Copy)]
pub enum RawBackwardMask<'a> {
    /// Computed in the kernel (no mask, causal, sliding window).
    Window(Window),
    /// A packed mask with transposed lists, the device addresses of its forward lists
    /// (`kv_*`, as [`super::RawMask::Blocks`]; their tile offsets and words are not read)
    /// and of its transposed lists and words (`q_*`). The host mask's lists are either
    /// those the device holds or empty (a mask packed on the GPU whose lists were not read
    /// back, whose host copy is its geometry only): paired key blocks build their table
    /// from the host's transposed lists, and run only where those have entries. The table
    /// holds the host's tile offsets, which index the device words: where the host has
    /// entries they must be the device's, entry for entry (Python's read-back copies the
    /// device buffers as they are).
    Blocks(&'a PackedMask, RawMaskLists, RawMaskLists),
}

/// Device addresses of the three gradients of a raw call: contiguous `dq [B, H, Sq, D]`,
/// `dk`, `dv [B, H_kv, Sk, D]`, 16-byte aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawGradients {
    /// dQ.
    pub dq: u64,
    /// dK.
    pub dk: u64,
    /// dV.
    pub dv: u64,
}

/// The three loaded kernels of one configuration.
#[derive(Debug, Clone)]
pub(crate) struct BackwardFunctions {
    pre: CudaFunction,
    main: CudaFunction,
    post: CudaFunction,
    /// The kv postprocess of group slices (`BackwardKernel::with_group_slices`).
    post_kv: Option<CudaFunction>,
}

/// The backward's compiled cubin and ptxas' report of the main kernel.
#[derive(Debug, Clone)]
pub struct CompiledBackward {
    /// Configuration.
    pub config: BackwardKernel,
    /// Generated source.
    pub source: String,
    /// sm_90a cubin.
    pub cubin: Vec<u8>,
    /// NVRTC / ptxas log.
    pub log: String,
    /// Registers per thread of the main kernel at entry (0 if not reported).
    pub registers: u32,
    /// Spill bytes (stores + loads) of the main kernel.
    pub spill_bytes: u32,
}

/// Generates and compiles `config` for sm_90a through `compiler`.
pub fn compile_backward_with(
    compiler: &Compiler,
    config: &BackwardKernel,
) -> Result<CompiledBackward, AttentionError> {
    let source = config.source().map_err(AttentionError::Config)?;
    let cubin = compiler
        .compile_cubin(&source, &CompileOptions::new(Arch::sm90a()))
        .map_err(AttentionError::Host)?;
    let report = ptxas::parse_ptxas_log(&cubin.log)
        .remove(KERNEL_NAME)
        .unwrap_or_default();
    Ok(CompiledBackward {
        config: *config,
        source,
        cubin: cubin.bytes,
        log: cubin.log,
        registers: report.registers.unwrap_or(0),
        spill_bytes: report.spill_store_bytes.unwrap_or(0) + report.spill_load_bytes.unwrap_or(0),
    })
}

/// Generates and compiles `config` through the on-disk NVRTC cache.
pub fn compile_backward(config: &BackwardKernel) -> Result<CompiledBackward, AttentionError> {
    compile_backward_with(&Compiler::new(), config)
}

/// The transposed lists of `mask`, or the error naming the command that adds them.
pub fn transposed_lists(mask: &PackedMask) -> Result<&TransposedLists, AttentionError> {
    mask.transposed().map_err(|_| {
        AttentionError::Mask(
            "the mask has no transposed lists, which the backward pass needs; add them with \
             `fragmask pack --transposed` (or `fragmask pack --packed FILE --transposed -o OUT`)"
                .into(),
        )
    })
}

/// A validated backward call whose buffers stay borrowed: [`Self::launch`] enqueues its
/// three kernels.
pub struct PreparedBackward<'a> {
    stream: &'a Arc<CudaStream>,
    resolved: Resolved,
    _borrows: std::marker::PhantomData<&'a mut BackwardWorkspace>,
}

impl PreparedBackward<'_> {
    /// Enqueues the preprocess, main and postprocess kernels (asynchronous).
    pub fn launch(&self) -> Result<(), AttentionError> {
        // SAFETY: every buffer the launches address is borrowed for 'a and was checked
        // against the shape when this call was prepared.
        unsafe { self.resolved.launch(self.stream) }
    }

    /// The configuration it launches.
    pub fn kernel(&self) -> BackwardKernel {
        self.resolved.kernel
    }

    /// The stream the launches are enqueued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
}

/// Checks a raw tensor's shape against the expected one.
fn check_shape(name: &str, found: [usize; 4], want: [usize; 4]) -> Result<(), AttentionError> {
    if found != want {
        return Err(AttentionError::Shape(format!(
            "{name} has shape {found:?}, the call needs {want:?}"
        )));
    }
    Ok(())
}

impl AttentionRunner {
    /// The loaded backward kernels of `config`, compiling them on first use.
    pub(crate) fn backward_functions(
        &self,
        config: &BackwardKernel,
    ) -> Result<BackwardFunctions, AttentionError> {
        // The kv postprocess exists only with group slices.
        let with_post_kv = config.group_slices() > 1;
        let names = [
            PRE_KERNEL_NAME,
            KERNEL_NAME,
            POST_KERNEL_NAME,
            POST_KV_KERNEL_NAME,
        ];
        let module = module_cache::load::<AttentionError>(
            self.stream().context(),
            ContentDigest::of_variant("attention backward", config),
            if with_post_kv { &names } else { &names[..3] },
            || Ok(compile_backward_with(&self.compiler, config)?.cubin),
            |m| Ok(m.allow_dynamic_shared_memory(KERNEL_NAME, config.smem_bytes())?),
        )?;
        Ok(BackwardFunctions {
            pre: module.function(PRE_KERNEL_NAME)?,
            main: module.function(KERNEL_NAME)?,
            post: module.function(POST_KERNEL_NAME)?,
            post_kv: with_post_kv
                .then(|| module.function(POST_KV_KERNEL_NAME))
                .transpose()?,
        })
    }

    /// Allocates dQ, dK, dV for `shape` (contents undefined until a backward writes them).
    pub fn alloc_gradients(&self, shape: &AttentionShape) -> Result<Gradients, AttentionError> {
        let alloc = |s: [usize; 4]| -> Result<DeviceTensor<u16>, AttentionError> {
            // SAFETY: the backward writes every element before anyone reads it.
            let data = unsafe { self.stream.alloc::<u16>(s.iter().product()) }
                .map_err(driver("allocating gradients"))?;
            Ok(DeviceTensor { data, shape: s })
        };
        Ok(Gradients {
            dq: alloc(shape.q_shape())?,
            dk: alloc(shape.kv_shape())?,
            dv: alloc(shape.kv_shape())?,
        })
    }

    /// Runs the backward into new gradients, with a new workspace.
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        q: &DeviceTensor<u16>,
        k: &DeviceTensor<u16>,
        v: &DeviceTensor<u16>,
        o: &DeviceTensor<u16>,
        lse: &CudaSlice<f32>,
        d_o: &DeviceTensor<u16>,
        mask: &Mask<'_>,
        opts: &BackwardOptions,
    ) -> Result<Gradients, AttentionError> {
        let shape = AttentionShape::from_tensors(q.shape, k.shape, v.shape)?;
        let mut ws = BackwardWorkspace::new(&self.stream, &shape)?;
        let mut grads = self.alloc_gradients(&shape)?;
        self.backward_into(q, k, v, o, lse, d_o, mask, opts, &mut ws, &mut grads)?;
        Ok(grads)
    }

    /// Runs the backward into `grads` with the caller's workspace (enqueued; synchronise the
    /// stream to wait). Every shape, the mask and the configuration are checked before the
    /// first launch. Nothing is allocated but the table a call may need, built and uploaded
    /// (synchronously) on every call: the documents grid's work items, or the paired key
    /// blocks' steps on a 64x64 mask (host pairing, milliseconds at write-up 002's sizes).
    /// A call repeated on the same shapes plans once instead ([`Self::plan_backward`]).
    #[allow(clippy::too_many_arguments)]
    pub fn backward_into(
        &self,
        q: &DeviceTensor<u16>,
        k: &DeviceTensor<u16>,
        v: &DeviceTensor<u16>,
        o: &DeviceTensor<u16>,
        lse: &CudaSlice<f32>,
        d_o: &DeviceTensor<u16>,
        mask: &Mask<'_>,
        opts: &BackwardOptions,
        ws: &mut BackwardWorkspace,
        grads: &mut Gradients,
    ) -> Result<(), AttentionError> {
        self.prepare_backward(q, k, v, o, lse, d_o, mask, opts, ws, grads)?
            .launch()
    }

    /// Validates a call and resolves its three launches, for repeated timing
    /// (`fragmask_check::attention::time_backward`); the buffers stay borrowed while the result lives.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare_backward<'a>(
        &'a self,
        q: &'a DeviceTensor<u16>,
        k: &'a DeviceTensor<u16>,
        v: &'a DeviceTensor<u16>,
        o: &'a DeviceTensor<u16>,
        lse: &'a CudaSlice<f32>,
        d_o: &'a DeviceTensor<u16>,
        mask: &Mask<'a>,
        opts: &BackwardOptions,
        ws: &'a mut BackwardWorkspace,
        grads: &'a mut Gradients,
    ) -> Result<PreparedBackward<'a>, AttentionError> {
        let shape = AttentionShape::from_tensors(q.shape, k.shape, v.shape)?;
        for (name, t) in [("q", q), ("k", k), ("v", v), ("o", o), ("d_o", d_o)] {
            if t.data.len() != t.shape.iter().product::<usize>() {
                return Err(AttentionError::Shape(format!(
                    "{name} buffer length does not match {:?}",
                    t.shape
                )));
            }
        }
        check_shape("o", o.shape, shape.q_shape())?;
        check_shape("d_o", d_o.shape, shape.q_shape())?;
        if lse.len() != shape.lse_len() {
            return Err(AttentionError::Shape(format!(
                "lse has {} elements, the call needs [B, H, Sq] = {}",
                lse.len(),
                shape.lse_len()
            )));
        }
        for (name, t, want) in [
            ("dq", &grads.dq, shape.q_shape()),
            ("dk", &grads.dk, shape.kv_shape()),
            ("dv", &grads.dv, shape.kv_shape()),
        ] {
            check_shape(name, t.shape, want)?;
            if t.data.len() != want.iter().product::<usize>() {
                return Err(AttentionError::Shape(format!(
                    "{name} buffer length does not match {want:?}"
                )));
            }
        }
        // Gradients through `grad_strides` stay inside their buffers.
        if let Some(g) = &opts.grad_strides {
            check_output_buffer("dq", shape.q_shape(), g.dq, grads.dq.data.len())?;
            check_output_buffer("dk", shape.kv_shape(), g.dkv, grads.dk.data.len())?;
            check_output_buffer("dv", shape.kv_shape(), g.dkv, grads.dv.data.len())?;
        }
        let s = &self.stream;
        let contiguous =
            |t: &DeviceTensor<u16>| RawTensor::contiguous(t.data.device_ptr(s).0, t.shape);
        let raw_mask = match mask {
            Mask::Window(w) => RawBackwardMask::Window(*w),
            Mask::Blocks(m) => device_mask(m, s)?,
        };
        let out = RawGradients {
            dq: grads.dq.data.device_ptr(s).0,
            dk: grads.dk.data.device_ptr(s).0,
            dv: grads.dv.data.device_ptr(s).0,
        };
        let lse_ptr = lse.device_ptr(s).0;
        let resolved = self.resolve(
            &contiguous(q),
            &contiguous(k),
            &contiguous(v),
            &contiguous(o),
            lse_ptr,
            &contiguous(d_o),
            &raw_mask,
            opts,
            out,
            ws,
            Upload::Allowed,
        )?;
        Ok(PreparedBackward {
            stream: s,
            resolved,
            _borrows: std::marker::PhantomData,
        })
    }

    /// Launches the backward on `stream` over tensors owned by the caller (torch, say): q,
    /// k, v, o and d_o strided as [`RawTensor`] (D contiguous, 16-byte strides), `lse` a
    /// contiguous f32 `[B, H, Sq]`, the gradients laid out as `opts.grad_strides` says
    /// (contiguous by default; [`RawGradients`]), and the workspace the caller keeps ([`BackwardWorkspace::fits`] the shape). Shapes, strides,
    /// alignment, the mask and the configuration are checked before anything is launched;
    /// compilation happens at the first call of each configuration
    /// ([`Self::warm_up_backward`]). Nothing is allocated or synchronised.
    ///
    /// # Safety
    /// Every address must point into a live device allocation of this context, large
    /// enough for the shape and strides given, valid until the kernels complete on
    /// `stream`; the gradients must not overlap the inputs or each other, and `ws` must not
    /// be used by another launch in flight.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_backward_raw(
        &self,
        stream: &Arc<CudaStream>,
        q: &RawTensor,
        k: &RawTensor,
        v: &RawTensor,
        o: &RawTensor,
        lse: u64,
        d_o: &RawTensor,
        mask: &RawBackwardMask<'_>,
        opts: &BackwardOptions,
        grads: RawGradients,
        ws: &mut BackwardWorkspace,
    ) -> Result<(), AttentionError> {
        // Nothing is uploaded here: the documents grid needs a plan (`plan_backward`).
        let resolved =
            self.resolve(q, k, v, o, lse, d_o, mask, opts, grads, ws, Upload::Refused)?;
        // SAFETY: the caller guarantees the addresses (this function's contract); shapes
        // and strides were checked by `resolve`.
        unsafe { resolved.launch(stream) }
    }

    /// Compiles and loads the backward kernels of `head_dim` in window mode and for masks
    /// of `block` (e.g. `(128, 128)`; with it, the documents grid where the options allow
    /// it), so that no later call compiles.
    pub fn warm_up_backward(
        &self,
        head_dim: usize,
        block: Option<(u32, u32)>,
        opts: &BackwardOptions,
    ) -> Result<(), AttentionError> {
        let d = u32::try_from(head_dim).unwrap_or(0);
        let mut modes = vec![BackwardMask::Window];
        if let Some((block_m, block_n)) = block {
            modes.push(BackwardMask::Blocks { block_m, block_n });
            // A mask with documents may run the documents grid (never deterministic).
            if !opts.deterministic
                && opts
                    .documents_grid
                    .unwrap_or(super::choice::BACKWARD_DOCUMENTS_GRID)
            {
                modes.push(BackwardMask::Documents);
            }
        }
        for mode in modes {
            let k = super::choice::backward_config(d, mode, opts)?;
            self.backward_functions(&k)?;
        }
        Ok(())
    }
}

/// A device block mask as a raw backward mask (its transposed lists must be there).
fn device_mask<'a>(
    m: &'a DeviceBlockMask,
    stream: &Arc<CudaStream>,
) -> Result<RawBackwardMask<'a>, AttentionError> {
    transposed_lists(&m.host)?;
    let t = m.device_transposed_lists(stream).ok_or_else(|| {
        AttentionError::Mask("the uploaded mask has no transposed lists on the device".into())
    })?;
    Ok(RawBackwardMask::Blocks(&m.host, m.device_lists(stream), t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_grad_strides_are_the_tensors_own() {
        let shape = AttentionShape {
            batch: 2,
            heads: 8,
            kv_heads: 2,
            seqlen_q: 100,
            seqlen_k: 300,
            head_dim: 64,
        };
        let g = GradStrides::contiguous(&shape);
        assert_eq!(g.dq, [8 * 100 * 64, 100 * 64, 64]);
        assert_eq!(g.dkv, [2 * 300 * 64, 300 * 64, 64]);
        assert!(check_output_strides("dq", shape.q_shape(), g.dq).is_ok());
        assert!(check_output_strides("dk and dv", shape.kv_shape(), g.dkv).is_ok());
        // [B, S, H, D] memory seen as [B, H, S, D]: rows H * D apart, heads D apart.
        assert!(check_output_strides("dq", shape.q_shape(), [100 * 8 * 64, 64, 8 * 64]).is_ok());
        // Heads and rows sharing addresses (a stride of D for both) are refused.
        let e = check_output_strides("dq", shape.q_shape(), [100 * 8 * 64, 64, 64]).unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
    }

    #[test]
    fn workspace_rows_pad_to_the_largest_mask_tile() {
        let shape = AttentionShape {
            batch: 2,
            heads: 3,
            kv_heads: 1,
            seqlen_q: 130,
            seqlen_k: 70,
            head_dim: 128,
        };
        let (rows, accum, sem) = workspace::workspace_len(&shape).unwrap();
        assert_eq!(rows, 2 * 3 * 256);
        assert_eq!(accum, rows * 128);
        assert_eq!(sem, rows / 64 * 2);
    }

    #[test]
    fn a_mask_without_transposed_lists_names_the_command_that_adds_them() {
        let acc = fragmask_masks::TiledAccumulator::new(128, 128, 2, false).unwrap();
        let dense = vec![1u8; 200 * 150];
        let mask = fragmask_masks::DenseMask::new(&dense, &[200, 150]).unwrap();
        let packed = fragmask_masks::pack(
            &mask,
            &acc,
            fragmask_masks::Encoding::FragmentNative,
            &fragmask_masks::PackOptions::default(),
        )
        .unwrap();
        let e = backward_kernel(128, Some(&packed), &BackwardOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("fragmask pack --transposed"), "{e}");
        let backward = TransposedLists::default_accumulator(&acc).unwrap();
        let with = fragmask_masks::pack_transposed(
            &mask,
            &acc,
            fragmask_masks::Encoding::FragmentNative,
            &backward,
            &fragmask_masks::PackOptions::default(),
        );
        let k = backward_kernel(128, Some(&with.unwrap()), &BackwardOptions::default()).unwrap();
        assert_eq!(
            k.mask(),
            BackwardMask::Blocks {
                block_m: 128,
                block_n: 128
            }
        );
    }
}
