//! Masked attention forward on SM90 (H100): the host API.
//!
//! ```no_run
//! use fragmask_host::attention::{AttentionOptions, AttentionRunner, Mask};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let device = fragmask_host::Device::first()?;
//! let runner = AttentionRunner::new(&device)?;
//! let shape = [1, 16, 4096, 128];
//! let bits = vec![0x3F80u16; shape.iter().product()]; // bf16 1.0
//! let q = runner.upload_bf16(&bits, shape)?;
//! let k = runner.upload_bf16(&bits, shape)?;
//! let v = runner.upload_bf16(&bits, shape)?;
//! let out = runner.forward(&q, &k, &v, &Mask::causal(), &AttentionOptions::default())?;
//! # let _ = out; Ok(()) }
//! ```
//!
//! Conventions:
//! - Tensors are contiguous `[B, H, S, D]` bf16 (raw `u16` bits); K and V have
//!   `H_kv` heads with `H % H_kv == 0` (GQA/MQA: query head `h` reads K/V head
//!   `h / (H / H_kv)`). `Sq != Sk` and lengths that are not multiples of 128 are fine.
//! - Output `O` is `[B, H, Sq, D]` bf16 and `lse` `[B, H, Sq]` f32, the
//!   **natural-log** log-sum-exp of the scaled, masked scores (FlashAttention-3's
//!   `softmax_lse`). A row with no visible key gets `O = 0` and `lse = -inf`.
//! - Scale defaults to `1 / sqrt(D)`.
//! - [`Mask::Window`] computes causal / sliding-window visibility in the kernel
//!   (see [`Window`]); [`Mask::Blocks`] uses a FragmentNative
//!   [`PackedMask`] from the masks crate (the file `fragmask pack` writes), packed for
//!   the kernel's tile ([`blockmask`]).

pub mod backward;
pub mod blockmask;
pub mod choice;
pub mod compile;
pub mod documents;
pub mod persistent;
pub mod plan;
pub mod shared_kv;

#[cfg(test)]
#[path = "../../../../tests/support/proptest_ci.rs"]
mod proptest_ci;
pub mod splits;
pub mod strides;

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError};
use fragmask_kernels::attention::{
    ActDtype, AttentionKernel, AttentionParams, ConfigError, Geometry, MaskMode,
    COMBINE_KERNEL_NAME, COMBINE_THREADS, KERNEL_NAME, WINDOW_INFINITE,
};
use fragmask_masks::MaskError;

pub use compile::{compile_kernel, CompiledKernel};
pub use fragmask_masks::PackedMask;
pub use plan::{AttentionPlan, PlanPointers};

use crate::device_lists::{DeviceBlockLists, RawMaskLists};
use crate::launch::{KernelArg, Launch};
use crate::module_cache::{self, ContentDigest};
use crate::nvrtc::Compiler;
use crate::Device;

/// Everything the attention API can refuse or fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum AttentionError {
    /// Tensor shapes are inconsistent or unsupported.
    Shape(String),
    /// A block mask does not match the call's shapes.
    Mask(String),
    /// A packed mask was built for another tile or encoding than the kernel's.
    MaskLayout {
        /// What differs (`block_m`, `encoding`, ...).
        field: &'static str,
        /// The mask's value.
        found: String,
        /// The kernel's value.
        expected: String,
    },
    /// The masks crate refused to pack a mask.
    Masks(MaskError),
    /// The kernel configuration was refused.
    Config(ConfigError),
    /// The runtime (NVRTC, toolchain, CUDA driver, `cuobjdump`) failed.
    Host(crate::Error),
}

impl std::fmt::Display for AttentionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttentionError::Shape(m) => write!(f, "attention shapes: {m}"),
            AttentionError::Mask(m) => write!(f, "block mask: {m}"),
            AttentionError::MaskLayout {
                field,
                found,
                expected,
            } => write!(
                f,
                "block mask: {field} = {found}; the attention kernel needs {field} = {expected} \
                 (pack FragmentNative with one of the tiles {}, e.g. --block 64x64 --warpgroups 1)",
                Geometry::supported_list()
            ),
            AttentionError::Masks(e) => write!(f, "block mask: {e}"),
            AttentionError::Config(e) => write!(f, "attention kernel: {e}"),
            AttentionError::Host(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AttentionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AttentionError::Config(e) => Some(e),
            AttentionError::Host(e) => Some(e),
            AttentionError::Masks(e) => Some(e),
            _ => None,
        }
    }
}

impl From<crate::Error> for AttentionError {
    fn from(e: crate::Error) -> Self {
        AttentionError::Host(e)
    }
}

/// A driver failure while `context`, as the host crate's [`crate::Error::Driver`].
pub fn driver(context: &'static str) -> impl FnOnce(DriverError) -> AttentionError {
    move |source| AttentionError::Host(crate::Error::Driver { context, source })
}

/// The six extents of one attention call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionShape {
    /// Batch.
    pub batch: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (divides `heads`).
    pub kv_heads: usize,
    /// Query length.
    pub seqlen_q: usize,
    /// Key length.
    pub seqlen_k: usize,
    /// Head dimension (64, 128 or 256).
    pub head_dim: usize,
}

impl AttentionShape {
    /// Derives and checks the shape from `q [B,H,Sq,D]`, `k`, `v [B,Hkv,Sk,D]`.
    pub fn from_tensors(
        q: [usize; 4],
        k: [usize; 4],
        v: [usize; 4],
    ) -> Result<Self, AttentionError> {
        if k != v {
            return Err(AttentionError::Shape(format!("k {k:?} and v {v:?} differ")));
        }
        let s = AttentionShape {
            batch: q[0],
            heads: q[1],
            kv_heads: k[1],
            seqlen_q: q[2],
            seqlen_k: k[2],
            head_dim: q[3],
        };
        if k[0] != q[0] || k[3] != q[3] {
            return Err(AttentionError::Shape(format!(
                "q {q:?} and k {k:?} disagree on batch or head dim"
            )));
        }
        s.validate()?;
        Ok(s)
    }

    /// Checks extents: positive, `kv_heads | heads`, `D in {64, 128}`, and grid / TMA limits.
    pub fn validate(&self) -> Result<(), AttentionError> {
        let s = self;
        if [
            s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k, s.head_dim,
        ]
        .contains(&0)
        {
            return Err(AttentionError::Shape(format!("zero extent in {s:?}")));
        }
        if s.heads % s.kv_heads != 0 {
            return Err(AttentionError::Shape(format!(
                "kv heads {} do not divide query heads {}",
                s.kv_heads, s.heads
            )));
        }
        if ![64, 128, 256].contains(&s.head_dim) {
            return Err(AttentionError::Shape(format!(
                "head dim {} not supported (64, 128 or 256)",
                s.head_dim
            )));
        }
        if s.batch > 65535 || s.heads > 65535 || s.seqlen_q > (1 << 30) || s.seqlen_k > (1 << 30) {
            return Err(AttentionError::Shape(format!(
                "extents too large for the grid: {s:?}"
            )));
        }
        Ok(())
    }

    /// `[B, H, Sq, D]`.
    pub fn q_shape(&self) -> [usize; 4] {
        [self.batch, self.heads, self.seqlen_q, self.head_dim]
    }

    /// `[B, H_kv, Sk, D]`.
    pub fn kv_shape(&self) -> [usize; 4] {
        [self.batch, self.kv_heads, self.seqlen_k, self.head_dim]
    }

    /// Elements of `lse`: `B * H * Sq`.
    pub fn lse_len(&self) -> usize {
        self.batch * self.heads * self.seqlen_q
    }

    /// Dense-equivalent FLOPs: `4 * B * H * Sq * Sk * D`.
    pub fn dense_flops(&self) -> f64 {
        4.0 * (self.batch * self.heads) as f64
            * self.seqlen_q as f64
            * self.seqlen_k as f64
            * self.head_dim as f64
    }
}

/// Index-computed visibility: key `j` is visible from query `i` iff
/// `i + diag_offset - left <= j <= i + diag_offset + right` (a `None` bound is
/// unbounded) and `j < seqlen_k`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Window {
    /// Keys visible to the left of the diagonal (`None`: all).
    pub left: Option<u32>,
    /// Keys visible to the right of the diagonal (`None`: all).
    pub right: Option<u32>,
    /// Diagonal offset: 0 aligns query 0 with key 0 (top-left, torch SDPA
    /// `is_causal`); `seqlen_k - seqlen_q` aligns the last rows (bottom-right, FlashAttention).
    pub diag_offset: i32,
}

impl Window {
    /// No mask.
    pub const NONE: Window = Window {
        left: None,
        right: None,
        diag_offset: 0,
    };

    /// Causal, top-left aligned: query `i` sees keys `0..=i`.
    pub fn causal() -> Self {
        Window {
            left: None,
            right: Some(0),
            diag_offset: 0,
        }
    }

    /// Whether query `i` sees key `j` (`j < seqlen_k` is the caller's business).
    pub fn is_visible(&self, i: usize, j: usize) -> bool {
        let rel = j as i64 - i as i64 - i64::from(self.diag_offset);
        self.left.is_none_or(|l| rel >= -i64::from(l))
            && self.right.is_none_or(|r| rel <= i64::from(r))
    }
}

/// A [`PackedMask`] uploaded to the device.
#[derive(Debug)]
pub struct DeviceBlockMask {
    /// The host-side mask (lists and words are also kept on the host).
    pub host: PackedMask,
    lists: DeviceBlockLists,
    words: CudaSlice<u32>,
    /// The transposed lists and words (backward), when the mask has them.
    transposed: Option<backward::DeviceTransposed>,
}

impl DeviceBlockMask {
    /// The device addresses of the transposed lists and words (the backward's `q_*`);
    /// `None` when the mask was packed without them.
    pub fn device_transposed_lists(&self, stream: &Arc<CudaStream>) -> Option<RawMaskLists> {
        self.transposed.as_ref().map(|t| t.device_lists(stream))
    }

    /// The device addresses of the lists and words (the forward's `kv_*`).
    pub fn device_lists(&self, stream: &Arc<CudaStream>) -> RawMaskLists {
        RawMaskLists {
            lists: self.lists.raw(stream).0,
            words: self.words.device_ptr(stream).0,
            partial_count: 0,
            tile_order: 0,
        }
    }
}

/// Which keys each query sees.
#[derive(Debug, Clone, Copy)]
pub enum Mask<'a> {
    /// Computed in the kernel from indices (no mask, causal, sliding window).
    Window(Window),
    /// Tile lists with FragmentNative words.
    Blocks(&'a DeviceBlockMask),
}

impl Mask<'_> {
    /// No mask.
    pub fn none() -> Self {
        Mask::Window(Window::NONE)
    }

    /// Causal (top-left aligned).
    pub fn causal() -> Self {
        Mask::Window(Window::causal())
    }
}

/// A contiguous `[B, H, S, D]` device tensor.
#[derive(Debug)]
pub struct DeviceTensor<T> {
    /// The elements, row-major.
    pub data: CudaSlice<T>,
    /// `[B, H, S, D]`.
    pub shape: [usize; 4],
}

/// Options of one attention call.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AttentionOptions {
    /// Softmax scale; `None` is `1 / sqrt(D)`.
    pub scale: Option<f32>,
    /// K/V pipeline stages; `None` picks the default for the head dim.
    pub stages: Option<u32>,
    /// Intra-warpgroup GEMM/softmax overlap; `None` is on.
    pub overlap: Option<bool>,
    /// Inter-warpgroup ping-pong; `None` is the default of the kernel configuration.
    pub pingpong: Option<bool>,
    /// Producer tile-list lookahead; `None` is on.
    pub lookahead: Option<bool>,
    /// Tile geometry; `None` is the mask's tile with a block mask, else the default of the
    /// head dim. With a block mask, a geometry other than the mask's tile is an error.
    pub geometry: Option<Geometry>,
    /// Element type of q, k, v and o: bf16 (`None`) or fp16. The tensors of
    /// [`AttentionRunner::forward`] are bf16; a plan ([`AttentionRunner::plan`]) takes either.
    pub dtype: Option<ActDtype>,
    /// Split-KV (docs/architecture.md, "Split-KV forward"): each row block's key steps
    /// are cut into this many splits, run by separate CTAs whose partial (o, lse) a
    /// combine kernel merges. `None` or 1: no split. For calls with few row blocks and
    /// many keys (write-up 002's decode: one 64-row block per head against 23296 keys).
    pub splits: Option<u32>,
    /// Persistent CTAs (docs/architecture.md, "Persistent forward"): `None` is
    /// [`choice::forward_persistent`]'s default for the kernel; `Some(true)` asks for them
    /// (an error with split-KV or where the configuration cannot have them), `Some(false)`
    /// runs one CTA per work tile.
    pub persistent: Option<bool>,
    /// The most CTAs of a persistent launch; `None` is one per SM slot. Fewer give each
    /// CTA more work tiles (the selftests run several tiles per CTA on small shapes).
    pub persistent_ctas: Option<u32>,
    /// Lazy rescale of the online softmax ([`AttentionKernel::with_lazy_rescale`]);
    /// `None` is the kernel configuration's default (on).
    pub lazy_rescale: Option<bool>,
    /// Element strides `[batch, head, row]` of O (the head dim contiguous), e.g. those of
    /// `[B, S, H, D]` memory; `None`: contiguous `[B, H, Sq, D]`. Checked by
    /// [`strides::check_output_strides`], and by [`strides::check_output_buffer`] against
    /// an [`AttentionOutput`]'s buffer; lse stays contiguous `[B, H, Sq]`.
    pub out_strides: Option<[usize; 3]>,
    /// Q in registers for `S = Q K^T` ([`AttentionKernel::with_q_registers`]); `None` is
    /// the kernel configuration's default.
    pub q_registers: Option<bool>,
    /// Shared K/V of two 64-token query blocks per CTA ([`Geometry::TILE_64X64_SHARED`]):
    /// `None` is [`choice::shared_kv`]'s default for a 64x64 tile-list call with no
    /// geometry named; `Some(true)` asks for it (an error where the call cannot have it),
    /// `Some(false)` keeps the one-block tile (its step table is not uploaded).
    pub shared_kv: Option<bool>,
    /// (head, batch) planes per section of the forward's launch order
    /// ([`choice::head_section`]; docs/architecture.md, "Launch order"): `None` is the
    /// choice's default, `Some(1)` the plain order (each head's row blocks in turn).
    pub head_section: Option<u32>,
    /// The split tail ([`AttentionKernel::with_tail_split`]; docs/architecture.md, "Split
    /// tail"): the one-tile grid's last work tiles cut into splits, so its last wave runs
    /// on more SMs. `None`: on for the kernels of [`choice::tail_by_default`] where
    /// [`splits::plan_tail`] estimates the launch ends at least [`splits::TAIL_MIN_GAIN`]
    /// earlier; `Some(false)` off; `Some(true)` the estimate's tail on any kernel (an error
    /// where the call cannot have one). Asked for (`Some(true)` or a named `tail`), the
    /// defaults it cannot run with yield: one split, no persistent CTAs, the plain order,
    /// the tile lists (not the documents grid), the one-block tile (not shared K/V).
    pub tail_split: Option<bool>,
    /// With `tail_split` on: the tail's work tiles and splits instead of the estimate's
    /// (for the selftests and A/B measurements; both must be given).
    pub tail: Option<splits::TailSplit>,
    /// The block mask's host lists are a placeholder of its geometry (no tile), its real
    /// lists being on the device only (a GPU pack not read back): the split-KV count and
    /// the split tail are then planned as if every key block of every row were visited
    /// ([`split_plan_steps`], [`persistent::every_key_block_steps`]), not from the
    /// placeholder's zero steps, which would run a decode-shaped call on one split.
    pub mask_on_device_only: bool,
    /// Whether tile lists on the one-tile grid run their row blocks largest first
    /// (`AttentionParams::row_order`: the longest walks start first, the shortest fill the
    /// tail; docs/architecture.md, "Row order of the tile lists"); `None` is yes wherever
    /// the order is at hand: the lists' own on the device (the GPU packer writes it,
    /// [`crate::device_lists::RawMaskLists::tile_order`]), or one computed from the host's
    /// lists and uploaded at planning where it is not the grid's own order (from the last
    /// row). Not on persistent CTAs, the split tail, the documents grid or the shared-K/V
    /// tile; `Some(true)` turns the default split tail off and is an error there and where
    /// no order is at hand.
    pub tile_order: Option<bool>,
}

impl AttentionOptions {
    /// Whether the call asks for the split tail (`tail_split` `Some(true)` or a named
    /// `tail`): the split count, persistent CTAs, launch order, documents grid and
    /// shared-K/V tile it leaves unset then take the plain one-tile grid the tail runs on
    /// ([`choice::forward_tail`]).
    pub fn tail_asked(&self) -> bool {
        self.tail_split == Some(true) || self.tail.is_some()
    }
}

/// The longest row's key steps that the split-KV planner weighs
/// ([`splits::plan_splits`]): a block mask's own (its host lists), else every key block
/// (no mask, or a mask whose lists are on the device only,
/// [`AttentionOptions::mask_on_device_only`]).
pub fn split_plan_steps(
    kernel: &AttentionKernel,
    shape: &AttentionShape,
    mask: Option<&PackedMask>,
    opts: &AttentionOptions,
) -> usize {
    let g = kernel.geometry();
    match mask {
        Some(m) if !opts.mask_on_device_only => splits::max_steps_of_mask(m, &g),
        _ => (kernel.n_blocks(shape.seqlen_k as u32) as usize).div_ceil(g.step_blocks() as usize),
    }
}

/// Output of one attention call.
#[derive(Debug)]
pub struct AttentionOutput {
    /// `[B, H, Sq, D]` bf16 bits, laid out as the call's `AttentionOptions::out_strides`
    /// (contiguous by default).
    pub o: DeviceTensor<u16>,
    /// `[B, H, Sq]` natural-log LSE.
    pub lse: CudaSlice<f32>,
}

/// The tensor map of a `[B, H, S, D]` bf16 tensor: box 64 x rows x 1 x 1, 128-byte swizzle.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct TensorMapArg(sys::CUtensorMap);

// SAFETY: CUtensorMap is a plain 128-byte, 64-byte-aligned POD that the kernel takes by value
// (`const __grid_constant__ fm_tensor_map`, same size and alignment).
unsafe impl DeviceRepr for TensorMapArg {}

/// The kernel's `fm_attn_params`, passed by value: the struct generated from
/// `fragmask_kernels::attention::AttentionParams` (one field list for both sides).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
struct Params(AttentionParams);

// SAFETY: AttentionParams is #[repr(C)] plain data (u64 pointers, i32, f32) whose
// offsets and size equal the CUDA struct's: the kernels crate's test compares them with
// C's rules, and the generated source static_asserts the same numbers under NVRTC.
unsafe impl DeviceRepr for Params {}

/// A TMA map of a bf16 or fp16 tensor of logical shape `[B, H, S, D]` whose elements are
/// `strides` apart (`D` must be contiguous), loading boxes of 64 columns of D by
/// `box_rows` rows of S (the geometry's `block_m` for Q, `block_n` for K and V). TMA needs
/// a 16-byte-aligned base and strides that are multiples of 16 bytes (CUDA driver API,
/// cuTensorMapEncodeTiled).
fn encode_strided_map(
    ptr: u64,
    shape: [usize; 4],
    strides: [usize; 4],
    box_rows: u32,
    dtype: ActDtype,
) -> Result<TensorMapArg, AttentionError> {
    let data_type = match dtype {
        ActDtype::Bf16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        ActDtype::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        ActDtype::F32 => return Err(AttentionError::Config(ConfigError::Dtype(dtype))),
    };
    let [b, h, s, d] = shape;
    let elem = 2u64;
    if strides[3] != 1 {
        return Err(AttentionError::Shape(format!(
            "the head dim must be contiguous (stride 1), got strides {strides:?}"
        )));
    }
    let bytes = |x: usize| (x as u64).checked_mul(elem);
    let strides_bytes = [bytes(strides[2]), bytes(strides[1]), bytes(strides[0])];
    let strides: [u64; 3] = match strides_bytes {
        [Some(a), Some(b2), Some(c)] if [a, b2, c].iter().all(|x| x % 16 == 0 && *x < 1 << 40) => {
            [a, b2, c]
        }
        _ => {
            return Err(AttentionError::Shape(format!(
                "TMA needs the S, H and B strides to be multiples of 16 bytes (8 bf16 elements) \
                 below 2^40 bytes, got element strides {strides:?}"
            )))
        }
    };
    if ptr % 16 != 0 {
        return Err(AttentionError::Shape(format!(
            "TMA needs a 16-byte-aligned tensor, got address {ptr:#x}"
        )));
    }
    let dims: [u64; 4] = [d as u64, s as u64, h as u64, b as u64];
    let boxes: [u32; 4] = [64, box_rows, 1, 1];
    let elem_strides: [u32; 4] = [1, 1, 1, 1];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every pointer is valid for the rank (4) the driver reads; `map` is writable
    // and 64-byte aligned (CUtensorMap's own alignment).
    let rc = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            data_type,
            4,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    rc.result()
        .map_err(driver("encoding a tensor map (cuTensorMapEncodeTiled)"))?;
    // SAFETY: the driver initialised the map on success.
    Ok(TensorMapArg(unsafe { map.assume_init() }))
}

/// A planned forward bound to the buffers it borrows ([`AttentionRunner::prepare`]): the
/// plan, its tensor maps and parameters at the call's addresses, and the split-KV
/// workspace, allocated once when it was prepared; every [`Self::launch`] reuses them.
pub struct PreparedLaunch<'a> {
    stream: &'a Arc<CudaStream>,
    plan: AttentionPlan,
    bound: plan::BoundRun,
    /// Split-KV: the partial o and lse the bound parameters point into.
    _workspace: Option<SplitWorkspace>,
    _borrows: std::marker::PhantomData<&'a mut AttentionOutput>,
    /// The kernel configuration it launches.
    pub kernel: AttentionKernel,
    /// Shapes of the call.
    pub shape: AttentionShape,
    /// Split-KV splits of each row block (1: none).
    pub splits: u32,
}

impl PreparedLaunch<'_> {
    /// The runner's stream, which [`Self::launch`] enqueues on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }

    /// The plan it runs.
    pub fn plan(&self) -> &AttentionPlan {
        &self.plan
    }

    /// Enqueues the kernel on the runner's stream (asynchronous).
    pub fn launch(&self) -> Result<(), AttentionError> {
        // SAFETY: the bound addresses are q, k, v and the outputs borrowed for 'a (their
        // lengths checked against the plan's shape when this launch was prepared), the
        // mask's lists (borrowed for 'a through the mask) and the workspace this launch
        // owns, sized for the plan.
        unsafe { self.plan.enqueue(self.stream, &self.bound) }
    }
}

/// The split-KV workspace of a forward plan (fp32 partial o and lse,
/// [`AttentionPlan::workspace_floats`]), allocated once and reused by every run of the
/// plans it [`fits`](Self::fits), as the backward's [`backward::BackwardWorkspace`] and
/// decode's workspace are: runs that share one must be ordered (one stream).
#[derive(Debug)]
pub struct SplitWorkspace {
    o: CudaSlice<f32>,
    lse: CudaSlice<f32>,
}

impl SplitWorkspace {
    /// The workspace `plan` needs, on `stream` (one float each without splits).
    pub fn new(stream: &Arc<CudaStream>, plan: &AttentionPlan) -> Result<Self, AttentionError> {
        let (o, lse) = plan.workspace_floats;
        // SAFETY: every element of the workspace a combine reads is written by the
        // forward launch before it (each split writes all of its rows).
        let alloc = |n: usize| unsafe { stream.alloc::<f32>(n.max(1)) };
        Ok(Self {
            o: alloc(o).map_err(driver("allocating the split-KV workspace"))?,
            lse: alloc(lse).map_err(driver("allocating the split-KV workspace"))?,
        })
    }

    /// Whether it holds the partials of a run of `plan`.
    pub fn fits(&self, plan: &AttentionPlan) -> bool {
        let (o, lse) = plan.workspace_floats;
        self.o.len() >= o && self.lse.len() >= lse
    }

    /// The device addresses `(o, lse)` a run's [`PlanPointers::ws_o`] and
    /// [`PlanPointers::ws_lse`] take.
    pub fn device_ptrs(&self, stream: &Arc<CudaStream>) -> (u64, u64) {
        (self.o.device_ptr(stream).0, self.lse.device_ptr(stream).0)
    }
}

/// Launches the forward `func` (`launch`: no attribute) with its three tensor maps and
/// `params`, then, with split-KV, the `combine` (`grid` CTAs of [`COMBINE_THREADS`])
/// under programmatic dependent launch (the forward executes
/// `griddepcontrol.launch_dependents` at its start).
///
/// # Safety
/// `func` must be the forward of the kernel configuration `params` and `maps` were made
/// for, `combine` its module's combine; every address inside the maps and `params` (the
/// inputs, the outputs, the mask's lists, the workspace) must be valid until the
/// kernels complete on `stream`.
unsafe fn enqueue_forward(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    launch: Launch,
    maps: &[TensorMapArg; 3],
    params: Params,
    combine: Option<&(CudaFunction, u32)>,
) -> Result<(), AttentionError> {
    let [q, k, v] = maps;
    let args = [
        KernelArg::new(q),
        KernelArg::new(k),
        KernelArg::new(v),
        KernelArg::new(&params),
    ];
    // SAFETY: three by-value tensor maps and fm_attn_params, the forward's signature;
    // the addresses are this function's contract.
    unsafe { crate::launch::launch(stream, func, launch, &args) }
        .map_err(driver("launching the attention kernel"))?;
    if let Some((combine, grid)) = combine {
        let dependent = Launch::new((*grid, 1, 1), COMBINE_THREADS).dependent(true);
        // SAFETY: the combine takes fm_attn_params by value (the same struct); it reads
        // the workspace and writes o and lse (this function's contract).
        unsafe { crate::launch::launch(stream, combine, dependent, &[KernelArg::new(&params)]) }
            .map_err(driver("launching the split-KV combine"))?;
    }
    Ok(())
}

/// Compiles and loads (once per configuration and process, [`crate::module_cache`]) and
/// launches the attention kernels on one stream.
pub struct AttentionRunner {
    stream: Arc<CudaStream>,
    compiler: Compiler,
    /// The device's multiprocessor count, read once (the split planner's).
    sm_count: std::sync::OnceLock<usize>,
}

impl AttentionRunner {
    /// A runner on `device`'s default stream, compiling through the on-disk NVRTC cache.
    pub fn new(device: &Device) -> Result<Self, AttentionError> {
        let cc = device.compute_capability();
        if cc.major != 9 {
            return Err(AttentionError::Shape(format!(
                "the attention kernel needs an SM90 (Hopper) GPU; {} is compute capability {cc}",
                device.name()
            )));
        }
        Ok(Self::with_stream(device.default_stream()))
    }

    /// A runner on `stream`.
    pub fn with_stream(stream: Arc<CudaStream>) -> Self {
        Self {
            stream,
            compiler: Compiler::new(),
            sm_count: std::sync::OnceLock::new(),
        }
    }

    /// The stream every launch goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The split count of a call: `opts.splits`, or the planner's
    /// ([`splits::plan_splits`]) from the row blocks and the longest row's steps.
    fn planned_splits(
        &self,
        kernel: &AttentionKernel,
        shape: &AttentionShape,
        mask: Option<&PackedMask>,
        opts: &AttentionOptions,
    ) -> Result<u32, AttentionError> {
        if let Some(n) = opts.splits {
            return Ok(n);
        }
        if opts.tail_asked() {
            return Ok(1); // the split tail runs on the one-split grid
        }
        let steps = || split_plan_steps(kernel, shape, mask, opts);
        let rows = (kernel.m_blocks(shape.seqlen_q as u32) as usize)
            .saturating_mul(shape.heads)
            .saturating_mul(shape.batch);
        Ok(splits::plan_splits(rows, steps, self.sm_count()?))
    }

    /// The multiprocessor count of the stream's device (the split-KV planner's).
    fn sm_count(&self) -> Result<usize, AttentionError> {
        if let Some(&n) = self.sm_count.get() {
            return Ok(n);
        }
        let n = self
            .stream
            .context()
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver("reading the multiprocessor count"))?;
        Ok(*self.sm_count.get_or_init(|| n.max(1) as usize))
    }

    /// The largest-first dispatch order of a mask's call (the forward's row blocks, the
    /// backward's key tiles; `fragmask_masks::{row_order, tile_order}`): the lists' own on
    /// the device at `device` (the GPU packer's or transposer's, or a prepared mask's
    /// upload); else `host()`'s, computed from host lists (`None` where the host holds none),
    /// uploaded here unless `grid_order` says the kernel runs it without a table and `force`
    /// is off; else none.
    pub(crate) fn dispatch_order(
        &self,
        device: u64,
        host: impl FnOnce() -> Option<Vec<i32>>,
        grid_order: impl FnOnce(&[i32]) -> bool,
        force: bool,
    ) -> Result<Option<DispatchOrder>, AttentionError> {
        if device != 0 {
            if device % 4 != 0 {
                return Err(AttentionError::Shape(
                    "a dispatch order's device address must be 4-byte aligned".into(),
                ));
            }
            return Ok(Some(DispatchOrder {
                address: device,
                uploaded: None,
            }));
        }
        let Some(order) = host() else {
            return Ok(None);
        };
        if grid_order(&order) && !force {
            return Ok(None);
        }
        let (buf, address) = self.upload_table(&order, "uploading a mask's dispatch order")?;
        Ok(Some(DispatchOrder {
            address,
            uploaded: Some(buf),
        }))
    }

    /// Uploads a plan's work table once (the documents grids' work items, persistent CTAs'
    /// tiles) and synchronises, so a run on any stream reads it: the buffer and its address.
    pub(crate) fn upload_table(
        &self,
        table: &[i32],
        what: &'static str,
    ) -> Result<(Arc<CudaSlice<i32>>, u64), AttentionError> {
        let buf = self.stream.clone_htod(table).map_err(driver(what))?;
        self.stream.synchronize().map_err(driver(what))?;
        let ptr = buf.device_ptr(&self.stream).0;
        Ok((Arc::new(buf), ptr))
    }

    /// Copies bf16 bits to a new device tensor.
    pub fn upload_bf16(
        &self,
        bits: &[u16],
        shape: [usize; 4],
    ) -> Result<DeviceTensor<u16>, AttentionError> {
        if bits.len() != shape.iter().product::<usize>() {
            return Err(AttentionError::Shape(format!(
                "{} elements for shape {shape:?}",
                bits.len()
            )));
        }
        let data = self
            .stream
            .clone_htod(bits)
            .map_err(driver("uploading a tensor"))?;
        Ok(DeviceTensor { data, shape })
    }

    /// Checks that `mask` was packed for one of the kernel's tile geometries and its
    /// encoding ([`blockmask::mask_geometry`]; its lists were validated when it was packed
    /// or read) and uploads its lists and words.
    pub fn upload_block_mask(&self, mask: &PackedMask) -> Result<DeviceBlockMask, AttentionError> {
        blockmask::mask_geometry(mask)?;
        let words: Vec<u32> = if mask.words().is_empty() {
            vec![0; 2]
        } else {
            mask.words().to_vec()
        };
        Ok(DeviceBlockMask {
            lists: DeviceBlockLists::upload(&self.stream, mask.lists())
                .map_err(driver("uploading a block mask"))?,
            words: self
                .stream
                .clone_htod(&words)
                .map_err(driver("uploading mask words"))?,
            transposed: backward::DeviceTransposed::upload(&self.stream, mask)?,
            host: mask.clone(),
        })
    }

    /// Allocates an output for `shape` (contents undefined until a forward writes it).
    pub fn alloc_output(&self, shape: &AttentionShape) -> Result<AttentionOutput, AttentionError> {
        let q = shape.q_shape();
        // SAFETY: the buffers are written by the kernel before being read; callers that read
        // them earlier (poisoning tests) overwrite them first.
        let o = unsafe { self.stream.alloc::<u16>(q.iter().product()) }
            .map_err(driver("allocating O"))?;
        // SAFETY: as O: the kernel writes every lse value it is asked for before any read.
        let lse = unsafe { self.stream.alloc::<f32>(shape.lse_len()) }
            .map_err(driver("allocating lse"))?;
        Ok(AttentionOutput {
            o: DeviceTensor { data: o, shape: q },
            lse,
        })
    }

    /// The loaded kernel for `config`, compiling it on first use.
    pub fn function(&self, config: &AttentionKernel) -> Result<CudaFunction, AttentionError> {
        Ok(self.functions(config)?.0)
    }

    /// The loaded forward and split-KV combine kernels of `config` (one module), compiling
    /// them on first use.
    fn functions(
        &self,
        config: &AttentionKernel,
    ) -> Result<(CudaFunction, CudaFunction), AttentionError> {
        let module = module_cache::load::<AttentionError>(
            self.stream.context(),
            ContentDigest::of_variant("attention forward", config),
            &[KERNEL_NAME, COMBINE_KERNEL_NAME],
            || Ok(compile::compile_kernel_with(&self.compiler, config)?.cubin),
            |m| Ok(m.allow_dynamic_shared_memory(KERNEL_NAME, config.smem_bytes())?),
        )?;
        Ok((
            module.function(KERNEL_NAME)?,
            module.function(COMBINE_KERNEL_NAME)?,
        ))
    }

    /// Runs the forward into a new output.
    pub fn forward(
        &self,
        q: &DeviceTensor<u16>,
        k: &DeviceTensor<u16>,
        v: &DeviceTensor<u16>,
        mask: &Mask<'_>,
        opts: &AttentionOptions,
    ) -> Result<AttentionOutput, AttentionError> {
        let shape = AttentionShape::from_tensors(q.shape, k.shape, v.shape)?;
        let mut out = self.alloc_output(&shape)?;
        self.forward_into(q, k, v, mask, opts, &mut out)?;
        Ok(out)
    }

    /// Runs the forward into `out` (enqueued; synchronise the stream to wait): a
    /// [`Self::prepare`] and one launch, so a split call allocates its workspace here;
    /// repeated calls keep the [`PreparedLaunch`] (or a plan and a [`SplitWorkspace`]).
    pub fn forward_into(
        &self,
        q: &DeviceTensor<u16>,
        k: &DeviceTensor<u16>,
        v: &DeviceTensor<u16>,
        mask: &Mask<'_>,
        opts: &AttentionOptions,
        out: &mut AttentionOutput,
    ) -> Result<(), AttentionError> {
        self.prepare(q, k, v, mask, opts, out)?.launch()
    }

    /// Plans the call ([`Self::plan`]) and binds the plan to these buffers and to a
    /// split-KV workspace allocated here, for repeated launches (timing).
    pub fn prepare<'a>(
        &'a self,
        q: &'a DeviceTensor<u16>,
        k: &'a DeviceTensor<u16>,
        v: &'a DeviceTensor<u16>,
        mask: &Mask<'a>,
        opts: &AttentionOptions,
        out: &'a mut AttentionOutput,
    ) -> Result<PreparedLaunch<'a>, AttentionError> {
        let shape = AttentionShape::from_tensors(q.shape, k.shape, v.shape)?;
        for (name, t) in [("q", q), ("k", k), ("v", v)] {
            if t.data.len() != t.shape.iter().product::<usize>() {
                return Err(AttentionError::Shape(format!(
                    "{name} buffer length does not match {:?}",
                    t.shape
                )));
            }
        }
        if out.o.shape != shape.q_shape()
            || out.o.data.len() != shape.q_shape().iter().product::<usize>()
            || out.lse.len() != shape.lse_len()
        {
            return Err(AttentionError::Shape(format!(
                "output buffers do not match {shape:?}"
            )));
        }
        if opts.dtype.is_some_and(|d| d != ActDtype::Bf16) {
            return Err(AttentionError::Shape(
                "DeviceTensor inputs are bf16; run fp16 tensors through a plan (AttentionRunner::plan)"
                    .into(),
            ));
        }
        // O through `out_strides` (a [B, Sq, H, D] layout, say) stays inside the buffer.
        if let Some(st) = opts.out_strides {
            strides::check_output_buffer("o", shape.q_shape(), st, out.o.data.len())?;
        }
        let s = &self.stream;
        let tensor = |t: &DeviceTensor<u16>| RawTensor::contiguous(t.data.device_ptr(s).0, t.shape);
        let (q, k, v) = (tensor(q), tensor(k), tensor(v));
        let raw_mask = match mask {
            Mask::Window(w) => RawMask::Window(*w),
            Mask::Blocks(m) => RawMask::Blocks(&m.host, m.device_lists(s)),
        };
        let plan = self.plan(&q, &k, &v, &raw_mask, opts)?;
        // Split-KV or the split tail: the combine's partials need a workspace.
        let workspace = match plan.workspace_floats {
            (0, 0) => None,
            _ => Some(SplitWorkspace::new(s, &plan)?),
        };
        let (ws_o, ws_lse) = workspace.as_ref().map_or((0, 0), |w| w.device_ptrs(s));
        let bound = plan.bind(&PlanPointers {
            q: q.ptr,
            k: k.ptr,
            v: v.ptr,
            o: out.o.data.device_ptr(s).0,
            lse: out.lse.device_ptr(s).0,
            ws_o,
            ws_lse,
        })?;
        Ok(PreparedLaunch {
            stream: s,
            kernel: plan.kernel,
            shape: plan.shape,
            splits: plan.splits,
            plan,
            bound,
            _workspace: workspace,
            _borrows: std::marker::PhantomData,
        })
    }
}

/// The parameters every call shares: shape, scale, outputs, no mask.
fn base_params(
    shape: &AttentionShape,
    kernel: &AttentionKernel,
    opts: &AttentionOptions,
    o: u64,
    lse: u64,
) -> AttentionParams {
    let scale = opts.scale.unwrap_or(1.0 / (shape.head_dim as f32).sqrt());
    // Checked by the plan (strides::check_output_strides): each fits an i64.
    let [o_stride_b, o_stride_h, o_stride_s] = opts
        .out_strides
        .unwrap_or_else(|| strides::contiguous_strides(shape.q_shape()))
        .map(|x| x as i64);
    AttentionParams {
        o_stride_b,
        o_stride_h,
        o_stride_s,
        o,
        lse,
        batch: shape.batch as i32,
        heads: shape.heads as i32,
        kv_heads: shape.kv_heads as i32,
        seqlen_q: shape.seqlen_q as i32,
        seqlen_k: shape.seqlen_k as i32,
        m_blocks: kernel.m_blocks(shape.seqlen_q as u32) as i32,
        n_blocks: kernel.n_blocks(shape.seqlen_k as u32) as i32,
        window_left: WINDOW_INFINITE,
        window_right: WINDOW_INFINITE,
        scale_log2: scale * std::f32::consts::LOG2_E,
        scale,
        num_splits: 1,
        ..AttentionParams::default()
    }
}

/// Window mode: the bounds, clamped to the kernel's "unbounded".
fn window_params(params: &mut AttentionParams, w: &Window) {
    let clamp =
        |x: Option<u32>| x.map_or(WINDOW_INFINITE, |v| v.min(WINDOW_INFINITE as u32) as i32);
    params.window_left = clamp(w.left);
    params.window_right = clamp(w.right);
    params.diag_offset = w.diag_offset;
}

/// Block mode: `host` checked against the call, its broadcast strides, and the device
/// addresses of its lists and words.
fn blocks_params(
    params: &mut AttentionParams,
    host: &PackedMask,
    lists: RawMaskLists,
    shape: &AttentionShape,
) -> Result<(), AttentionError> {
    blockmask::check_fits(host, shape)?;
    let h = host.shape();
    let mb = params.m_blocks;
    params.mask_head_stride = if h.heads > 1 { mb } else { 0 };
    params.mask_batch_stride = if h.batch > 1 { h.heads as i32 * mb } else { 0 };
    [
        params.kv_num_blocks,
        params.kv_indices,
        params.full_kv_num_blocks,
        params.full_kv_indices,
        params.kv_tile_offsets,
    ] = lists.lists.to_array();
    params.words = lists.words;
    Ok(())
}

/// A dispatch order of a call ([`AttentionRunner::dispatch_order`]): its device address,
/// and its buffer where the call uploaded it (kept while the parameters point at it).
#[derive(Debug)]
pub(crate) struct DispatchOrder {
    pub(crate) address: u64,
    pub(crate) uploaded: Option<Arc<CudaSlice<i32>>>,
}

/// The run-time density check's params (`lists_partial_count`, `lists_tiles`;
/// `ListEntries::DenseAtRunTime`): the GPU packer's count at `partial_count` (an i32, so
/// 4-byte aligned, else an error) and the tiles of `lists`' grid (rows × listed blocks; the
/// same in both directions), or -1 where they do not fit the packer's i32 count, which no
/// count then equals.
pub(crate) fn lists_count(
    lists: &fragmask_masks::BlockLists,
    partial_count: u64,
) -> Result<(u64, i32), AttentionError> {
    if partial_count % 4 != 0 {
        return Err(AttentionError::Mask(format!(
            "the lists' partial-tile count at {partial_count:#x} is not 4-byte aligned"
        )));
    }
    let tiles = lists
        .rows()
        .checked_mul(lists.row_len())
        .and_then(|t| i32::try_from(t).ok())
        .unwrap_or(-1);
    Ok((partial_count, tiles))
}

/// A bf16 tensor owned elsewhere (by torch, say): its device address, logical shape
/// `[B, H, S, D]` and the element strides of those four dimensions. `[B, S, H, D]`
/// storage is `[B, H, S, D]` with the strides of S and H swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawTensor {
    /// Device address of element `[0, 0, 0, 0]`.
    pub ptr: u64,
    /// `[B, H, S, D]`.
    pub shape: [usize; 4],
    /// Element strides of B, H, S, D (D's must be 1).
    pub strides: [usize; 4],
}

impl RawTensor {
    /// A contiguous `[B, H, S, D]` tensor at `ptr`.
    pub fn contiguous(ptr: u64, shape: [usize; 4]) -> Self {
        let [_, h, s, d] = shape;
        Self {
            ptr,
            shape,
            strides: [h * s * d, s * d, d, 1],
        }
    }
}

/// A mask whose lists live on the device already (uploaded by the caller).
#[derive(Debug, Clone, Copy)]
pub enum RawMask<'a> {
    /// Computed in the kernel (no mask, causal, sliding window).
    Window(Window),
    /// A packed mask and the device addresses of its lists and words.
    Blocks(&'a PackedMask, RawMaskLists),
}

impl AttentionRunner {
    /// Compiles and loads the kernel of `head_dim` for every mask mode (on `opts.geometry`,
    /// or the head dim's default), with and without split-KV (the documents grid: without),
    /// so that no later call compiles (CUDA-graph capture, latency-sensitive first calls).
    pub fn warm_up(&self, head_dim: usize, opts: &AttentionOptions) -> Result<(), AttentionError> {
        for mode in [MaskMode::Window, MaskMode::Blocks] {
            let kernel = choice::call_kernel(head_dim, mode, None, opts)?;
            for split_kv in [false, true] {
                self.function(&kernel.with_split_kv(split_kv))?;
            }
            self.warm_up_persistent(&kernel, opts)?;
        }
        // The documents grid never splits.
        let documents = choice::call_kernel(head_dim, MaskMode::Documents, None, opts)?;
        self.function(&documents)?;
        self.warm_up_persistent(&documents, opts)
    }

    /// Compiles the persistent form of `kernel` where a call may pick it
    /// ([`choice::forward_persistent`]: not turned off, and the second Q buffer fits).
    fn warm_up_persistent(
        &self,
        kernel: &AttentionKernel,
        opts: &AttentionOptions,
    ) -> Result<(), AttentionError> {
        if opts.persistent != Some(false)
            && kernel
                .geometry()
                .persistent_fits(kernel.head_dim(), kernel.stages())
        {
            let persistent = kernel
                .with_persistent(true)
                .map_err(AttentionError::Config)?;
            self.function(&persistent)?;
        }
        Ok(())
    }
}

/// One-shot forward on the stream of `q` (compiles and loads the kernel on
/// every call; keep an [`AttentionRunner`] for repeated calls).
pub fn attention_forward(
    q: &DeviceTensor<u16>,
    k: &DeviceTensor<u16>,
    v: &DeviceTensor<u16>,
    mask: &Mask<'_>,
    opts: &AttentionOptions,
) -> Result<AttentionOutput, AttentionError> {
    AttentionRunner::with_stream(q.data.stream().clone()).forward(q, k, v, mask, opts)
}

#[cfg(test)]
mod raw_tests {
    use super::*;

    #[test]
    fn strided_maps_refuse_what_tma_cannot_address_before_the_driver() {
        // [B, H, S, D] = [1, 2, 100, 64] stored as [B, S, H, D]: strides (S*H*D, D, H*D, 1).
        let shape = [1, 2, 100, 64];
        let bsh = [100 * 2 * 64, 64, 2 * 64, 1];
        // A non-contiguous head dim, a stride of 4 elements (8 bytes), an odd base:
        // refused before any driver call (this machine has none).
        for (ptr, strides, needle) in [
            (0x1000, [12800, 64, 128, 2], "contiguous"),
            (0x1000, [12800, 64, 4, 1], "multiples of 16 bytes"),
            (0x1008, bsh, "16-byte-aligned"),
        ] {
            let err = encode_strided_map(ptr, shape, strides, 128, ActDtype::Bf16)
                .err()
                .map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.contains(needle)),
                "{strides:?}: {err:?}"
            );
        }
    }

    #[test]
    fn the_run_time_check_takes_an_aligned_count_and_the_grid_s_tiles() {
        let acc = fragmask_masks::TiledAccumulator::new(128, 128, 2, false).unwrap();
        let shape = fragmask_masks::MaskShape::new(1, 2, 300, 700).unwrap();
        let geometry = PackedMask::geometry_only(&acc, blockmask::KERNEL_ENCODING, shape).unwrap();
        // 2 heads x 3 row blocks x 6 key blocks.
        assert_eq!(lists_count(geometry.lists(), 0x1000).unwrap(), (0x1000, 36));
        let e = lists_count(geometry.lists(), 0x1002).unwrap_err();
        assert!(e.to_string().contains("not 4-byte aligned"), "{e}");
    }

    #[test]
    fn blocks_params_broadcast_a_single_head_mask() {
        let shape = AttentionShape {
            batch: 2,
            heads: 4,
            kv_heads: 4,
            seqlen_q: 300,
            seqlen_k: 260,
            head_dim: 128,
        };
        let acc = fragmask_masks::TiledAccumulator::new(128, 128, 2, false).unwrap();
        let dense = vec![1u8; 300 * 260];
        let mask = fragmask_masks::DenseMask::new(&dense, &[300, 260]).unwrap();
        let packed = fragmask_masks::pack(
            &mask,
            &acc,
            fragmask_masks::Encoding::FragmentNative,
            &fragmask_masks::PackOptions::default(),
        )
        .unwrap();
        let kernel = AttentionKernel::default_for(128, MaskMode::Blocks).unwrap();
        let mut params = base_params(&shape, &kernel, &AttentionOptions::default(), 16, 32);
        let lists = RawMaskLists::from_array([1, 2, 3, 4, 5, 6]);
        blocks_params(&mut params, &packed, lists, &shape).unwrap();
        assert_eq!((params.mask_batch_stride, params.mask_head_stride), (0, 0));
        assert_eq!((params.kv_num_blocks, params.words), (1, 6));
        assert_eq!(params.m_blocks, 3);
        // The 64x64 geometry has twice the row blocks.
        let k64 =
            AttentionKernel::default_for_geometry(Geometry::TILE_64X64, 128, MaskMode::Blocks)
                .unwrap();
        assert_eq!(
            base_params(&shape, &k64, &AttentionOptions::default(), 16, 32).m_blocks,
            5
        );
    }
}
