//! Correctness sweep of the GPU attention against the CPU f64 reference.
//!
//! Used by `tests/attention_gpu.rs` and `fragmask attention --selftest` (the
//! GPU machine has no Rust toolchain, so the binary carries the sweep).
//! Every case draws fresh random inputs, poisons the outputs (bf16 NaN in O,
//! NaN in lse) before the run, and passes only if no NaN is left,
//! `||O - ref|| / ||ref|| < 2e-2`, rows with no visible key are exactly
//! `O = 0, lse = -inf`, and the other lse values are within 2e-2.
//!
//! Documents cases pack a causal or full document predicate (which keeps its document
//! boundaries) and fail unless the forward ran the documents grid.
//!
//! Block-mask cases pack their predicate with the masks crate's packer
//! ([`pack_for_kernel`]); the packed mask must decode to the predicate, and the CPU
//! reference reads the same packed mask the kernel gets.
//!
//! Cases with `AttentionOptions::mask_on_device_only` plan the mask as a GPU pack left on
//! the device is planned ([`left_on_device`]): the host holds its geometry only, and the
//! lists come with their partial-tile count on the device (`RawMaskLists::partial_count`),
//! so that the kernel checks their density when it runs; such a case fails unless the
//! kernel took that check (`ListEntries::DenseAtRunTime`) exactly at the head dims where the
//! host takes it (`choice::RUN_TIME_DENSITY_HEAD_DIMS`; the others read the lists). The
//! shared-K/V tile, whose step table is built from host lists, refuses such masks and runs
//! none of these cases.

use std::sync::Arc;

use fragmask_masks::{DocumentIds, MaskShape, Predicate as DocPredicate, PredicateMask};

use fragmask_host::cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use fragmask_kernels::attention::{ActDtype, Geometry, ListEntries, MaskMode};

use fragmask_host::attention::blockmask::{pack_for_kernel, FnMask};
use fragmask_host::attention::choice::{call_geometry, kernel_config, RUN_TIME_DENSITY_HEAD_DIMS};
use fragmask_host::attention::splits::TailSplit;
use fragmask_host::attention::strides;
use fragmask_host::attention::{
    driver, AttentionError, AttentionOptions, AttentionRunner, AttentionShape, Mask, PackedMask,
    PlanPointers, RawMask, RawTensor, SplitWorkspace, Window,
};

use super::reference::attention_reference;
use crate::numeric::{bf16_to_f32, f16_to_f32, f32_to_bf16};
pub use crate::synthetic::{block_sparse, blocks64, random_tokens, Predicate};

/// Tolerance on the relative L2 error of O.
pub const O_TOLERANCE: f64 = 2e-2;

/// How a case masks.
#[derive(Clone)]
pub enum CaseMask {
    /// Computed in the kernel.
    Window(Window),
    /// Packed into a FragmentNative block mask of extents `batch x heads` (1 broadcasts).
    Blocks {
        /// Mask batch extent.
        batch: usize,
        /// Mask head extent.
        heads: usize,
        /// Visibility.
        visible: Predicate,
    },
    /// Contiguous documents of these lengths (summing to `Sq == Sk`), causal or full
    /// within each: packed from the document-id predicate, so the mask keeps its
    /// documents and the forward must run the documents grid (a case fails otherwise).
    Documents {
        /// Tokens of each document, in order.
        lengths: Vec<usize>,
        /// Causal within each document (else every key of the document).
        causal: bool,
    },
}

impl CaseMask {
    /// The mask mode the case's kernel runs.
    pub fn mode(&self) -> MaskMode {
        match self {
            CaseMask::Window(_) => MaskMode::Window,
            CaseMask::Blocks { .. } => MaskMode::Blocks,
            CaseMask::Documents { .. } => MaskMode::Documents,
        }
    }
}

/// One sweep case.
#[derive(Clone)]
pub struct Case {
    /// Short description.
    pub name: String,
    /// Extents.
    pub shape: AttentionShape,
    /// Mask.
    pub mask: CaseMask,
    /// Options (stages, overlap).
    pub opts: AttentionOptions,
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// `||O - ref|| / ||ref||` (0 when the reference is all zero and O is too).
    pub rel_err: f64,
    /// Largest |lse - ref| over rows with a visible key.
    pub lse_err: f64,
    /// NaN or infinite values left in O (poison not overwritten, or computed NaN).
    pub bad_values: usize,
    /// Rows with no visible key whose O was not exactly 0 or lse not -inf.
    pub empty_row_errors: usize,
    /// Partial tiles in the packed mask (0 in window mode).
    pub partial_tiles: usize,
    /// The mask mode the forward ran (a documents case must run
    /// [`MaskMode::Documents`]).
    pub mode: MaskMode,
    /// Whether the forward ran persistent CTAs (a case asking for them must).
    pub persistent: bool,
    /// Verdict.
    pub passed: bool,
}

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Roughly standard normal (Irwin-Hall of 4 uniforms).
    fn normal(&mut self) -> f32 {
        ((self.next() + self.next() + self.next() + self.next() - 2.0) * 3f64.sqrt()) as f32
    }
}

/// The default sweep: odd lengths, GQA/MQA, causal and windows, random and
/// block-sparse masks, fully masked rows, empty and full masks, head dims 64, 128 and 256,
/// both main loops and extra stages.
pub fn default_cases() -> Vec<Case> {
    let shape = |b, h, hk, sq, sk, d| AttentionShape {
        batch: b,
        heads: h,
        kv_heads: hk,
        seqlen_q: sq,
        seqlen_k: sk,
        head_dim: d,
    };
    let def = AttentionOptions::default();
    let serial = AttentionOptions {
        overlap: Some(false),
        ..def
    };
    let split = |n| AttentionOptions {
        splits: Some(n),
        ..def
    };
    // Persistent CTAs, at most 3 of them (many work tiles each), the geometry's default stages.
    let persistent = || AttentionOptions {
        persistent: Some(true),
        persistent_ctas: Some(3),
        ..def
    };
    // The split tail: the launch order's last `tiles` work tiles, `splits` splits each.
    let tail = |tiles, splits| AttentionOptions {
        splits: Some(1),
        tail: Some(TailSplit { tiles, splits }),
        ..def
    };
    // O written into [B, Sq, H, D] memory (a bshd caller's, AttentionOptions::out_strides).
    let bshd_out = |s: AttentionShape, opts: AttentionOptions| AttentionOptions {
        out_strides: Some(strides::bshd_strides(s.q_shape())),
        ..opts
    };
    // A GPU pack left on the device (the lists' density checked when the kernel runs).
    let on_device = AttentionOptions {
        mask_on_device_only: true,
        ..def
    };
    let blocks = |batch, heads, visible: Predicate| CaseMask::Blocks {
        batch,
        heads,
        visible,
    };
    let docs = |lengths: &[usize], causal| CaseMask::Documents {
        lengths: lengths.to_vec(),
        causal,
    };
    let win = |left, right, diag_offset| {
        CaseMask::Window(Window {
            left,
            right,
            diag_offset,
        })
    };
    let mut cases = vec![
        (
            "dense d128 256x256",
            shape(1, 2, 2, 256, 256, 128),
            CaseMask::Window(Window::NONE),
            def,
        ),
        (
            "dense d64 odd 197x333 gqa 4/2",
            shape(1, 4, 2, 197, 333, 64),
            CaseMask::Window(Window::NONE),
            def,
        ),
        (
            "dense d128 serial 200x130",
            shape(2, 2, 1, 200, 130, 128),
            CaseMask::Window(Window::NONE),
            serial,
        ),
        (
            "causal d128 300x300 mqa",
            shape(1, 2, 1, 300, 300, 128),
            CaseMask::Window(Window::causal()),
            def,
        ),
        (
            "causal d64 130x400",
            shape(2, 2, 2, 130, 400, 64),
            CaseMask::Window(Window::causal()),
            def,
        ),
        (
            "causal bottom-right d128 100x333",
            shape(1, 2, 2, 100, 333, 128),
            win(None, Some(0), 233),
            def,
        ),
        (
            "window 50/20 d64 390x390",
            shape(1, 2, 2, 390, 390, 64),
            win(Some(50), Some(20), 0),
            def,
        ),
        (
            "causal rows empty d128 offset -50",
            shape(1, 1, 1, 260, 260, 128),
            win(None, Some(0), -50),
            def,
        ),
        (
            "causal d128 3 stages 515x515",
            shape(1, 1, 1, 515, 515, 128),
            CaseMask::Window(Window::causal()),
            AttentionOptions {
                stages: Some(3),
                ..def
            },
        ),
        (
            "blocks random 30% d128 1 stage 300x400",
            shape(1, 2, 2, 300, 400, 128),
            blocks(1, 2, random_tokens(0.3, 17)),
            AttentionOptions {
                stages: Some(1),
                ..def
            },
        ),
        (
            "blocks random 50% d128 per-head 300x300",
            shape(2, 2, 2, 300, 300, 128),
            blocks(2, 2, random_tokens(0.5, 11)),
            def,
        ),
        (
            "blocks random 10% d64 broadcast gqa 4/1 257x129",
            shape(1, 4, 1, 257, 129, 64),
            blocks(1, 1, random_tokens(0.1, 12)),
            def,
        ),
        (
            "blocks random 50% d128 serial 256x384",
            shape(1, 2, 2, 256, 384, 128),
            blocks(1, 2, random_tokens(0.5, 13)),
            serial,
        ),
        (
            "blocks block-sparse 30%x50% d128 640x640",
            shape(1, 2, 2, 640, 640, 128),
            blocks(1, 2, block_sparse(0.3, 0.5, 14)),
            def,
        ),
        (
            "blocks rows fully masked d128 300x260",
            shape(1, 2, 2, 300, 260, 128),
            blocks(
                1,
                1,
                Arc::new(|_, _, i, j| i % 7 != 3 && (i + 2 * j) % 5 != 0),
            ),
            def,
        ),
        (
            "blocks empty mask d64 200x200",
            shape(1, 2, 2, 200, 200, 64),
            blocks(1, 1, Arc::new(|_, _, _, _| false)),
            def,
        ),
        (
            "blocks full mask d128 333x333",
            shape(1, 2, 2, 333, 333, 128),
            blocks(1, 1, Arc::new(|_, _, _, _| true)),
            def,
        ),
        (
            "blocks causal-as-words d128 384x384",
            shape(1, 2, 2, 384, 384, 128),
            blocks(1, 1, Arc::new(|_, _, i, j| j <= i)),
            def,
        ),
        (
            "dense d256 gqa 4/2 200x333",
            shape(1, 4, 2, 200, 333, 256),
            CaseMask::Window(Window::NONE),
            def,
        ),
        (
            "causal bottom-right d256 257x300",
            shape(1, 2, 1, 257, 300, 256),
            win(None, Some(0), 43),
            def,
        ),
        (
            "blocks random 50% d256 per-head 300x260",
            shape(2, 2, 2, 300, 260, 256),
            blocks(2, 2, random_tokens(0.5, 16)),
            def,
        ),
        (
            "blocks rows fully masked d256 130x520",
            shape(1, 2, 2, 130, 520, 256),
            blocks(
                1,
                1,
                Arc::new(|_, _, i, j| i % 5 != 1 && (3 * i + j) % 4 != 0),
            ),
            def,
        ),
        (
            "fp16 dense d128 gqa 4/2 200x330",
            shape(1, 4, 2, 200, 330, 128),
            CaseMask::Window(Window::NONE),
            AttentionOptions {
                dtype: Some(ActDtype::F16),
                ..def
            },
        ),
        (
            "fp16 causal d64 257x257",
            shape(1, 2, 2, 257, 257, 64),
            CaseMask::Window(Window::causal()),
            AttentionOptions {
                dtype: Some(ActDtype::F16),
                ..def
            },
        ),
        (
            "fp16 blocks random 30% d128 300x400",
            shape(1, 2, 2, 300, 400, 128),
            blocks(1, 2, random_tokens(0.3, 18)),
            AttentionOptions {
                dtype: Some(ActDtype::F16),
                ..def
            },
        ),
        (
            "blocks 64-token lists 10% d128 per-head odd 900x1500",
            shape(2, 2, 2, 900, 1500, 128),
            blocks(2, 2, blocks64(0.1, 22)),
            def,
        ),
        (
            "blocks 64-token lists 50% d64 broadcast gqa 4/2 700x700",
            shape(1, 4, 2, 700, 700, 64),
            blocks(1, 1, blocks64(0.5, 23)),
            def,
        ),
        (
            "blocks 64-token lists 30% d128 serial 640x1280",
            shape(1, 2, 2, 640, 1280, 128),
            blocks(1, 2, blocks64(0.3, 24)),
            serial,
        ),
        (
            "blocks top-k k=Sk/8 d128 256x512",
            shape(1, 2, 2, 256, 512, 128),
            blocks(1, 2, random_tokens(0.125, 15)),
            def,
        ),
        // Split-KV: a few row blocks against many keys, the partials merged by the combine.
        (
            "split 5 blocks random 10% d128 64x3000",
            shape(1, 3, 3, 64, 3000, 128),
            blocks(1, 3, random_tokens(0.1, 19)),
            split(5),
        ),
        (
            "split 7 causal bottom-right d128 100x2000",
            shape(1, 2, 1, 100, 2000, 128),
            win(None, Some(0), 1900),
            split(7),
        ),
        (
            "split 16 (empty splits) dense d64 gqa 4/2 130x1500",
            shape(1, 4, 2, 130, 1500, 64),
            CaseMask::Window(Window::NONE),
            split(16),
        ),
        (
            "split 3 blocks rows fully masked d128 300x700",
            shape(2, 2, 2, 300, 700, 128),
            blocks(
                1,
                1,
                Arc::new(|_, _, i, j| i % 7 != 3 && (i + 2 * j) % 5 != 0),
            ),
            split(3),
        ),
        (
            "split 4 block-sparse per-head d256 64x1200",
            shape(1, 2, 2, 64, 1200, 256),
            blocks(1, 2, block_sparse(0.3, 0.5, 20)),
            split(4),
        ),
        // The documents grid: lengths off the 128 grid, one-token documents, a single
        // document, a document longer than S/2; causal and full within documents.
        (
            "documents causal ragged d128 gqa 4/2",
            shape(2, 4, 2, 1000, 1000, 128),
            docs(&[1, 200, 127, 129, 300, 1, 242], true),
            def,
        ),
        (
            "documents full ragged d128",
            shape(1, 2, 2, 1000, 1000, 128),
            docs(&[1, 200, 127, 129, 300, 1, 242], false),
            def,
        ),
        (
            "documents causal single d64",
            shape(1, 2, 2, 333, 333, 64),
            docs(&[333], true),
            def,
        ),
        (
            "documents causal long (> S/2) d128",
            shape(1, 2, 1, 900, 900, 128),
            docs(&[37, 700, 1, 162], true),
            def,
        ),
        (
            "documents full long (> S/2) d256",
            shape(1, 2, 2, 700, 700, 256),
            docs(&[500, 1, 199], false),
            def,
        ),
        (
            "documents causal one-token d128 serial",
            shape(1, 2, 2, 260, 260, 128),
            docs(&[1, 1, 128, 1, 129], true),
            serial,
        ),
        (
            "fp16 documents causal d128",
            shape(1, 2, 2, 777, 777, 128),
            docs(&[100, 300, 77, 300], true),
            AttentionOptions {
                dtype: Some(ActDtype::F16),
                ..def
            },
        ),
        // Launch-order sections (the one-tile grid's fm_work_at and the persistent table's
        // dealing order): sections of 3 and 5 of 12 (head, batch) planes, the last 5 narrower.
        (
            "sections of 3 causal d128 gqa 6/3 batch 2 400x400",
            shape(2, 6, 3, 400, 400, 128),
            CaseMask::Window(Window::causal()),
            AttentionOptions {
                head_section: Some(3),
                ..def
            },
        ),
        (
            "sections of 5 causal bottom-right d64 gqa 6/2 batch 2 300x500",
            shape(2, 6, 2, 300, 500, 64),
            win(None, Some(0), 200),
            AttentionOptions {
                head_section: Some(5),
                ..def
            },
        ),
        (
            "split 3 sections of 5 causal d128 gqa 6/3 batch 2 130x900",
            shape(2, 6, 3, 130, 900, 128),
            win(None, Some(0), 770),
            AttentionOptions {
                head_section: Some(5),
                ..split(3)
            },
        ),
        (
            "persistent sections of 5 causal d128 gqa 6/3 batch 2 500x500",
            shape(2, 6, 3, 500, 500, 128),
            CaseMask::Window(Window::causal()),
            AttentionOptions {
                head_section: Some(5),
                ..persistent()
            },
        ),
        // Persistent CTAs, capped at 3 so each CTA runs many work tiles: the K/V stages
        // and phases and the two Q buffers run on across tiles; tiles without steps
        // (empty rows, an empty mask) sit between tiles with steps.
        (
            "persistent causal d128 gqa 4/2 700x700",
            shape(2, 4, 2, 700, 700, 128),
            CaseMask::Window(Window::causal()),
            persistent(),
        ),
        (
            "persistent dense d64 odd 197x333 gqa 4/2",
            shape(2, 4, 2, 197, 333, 64),
            CaseMask::Window(Window::NONE),
            persistent(),
        ),
        (
            "persistent window 50/20 d128 serial 390x390",
            shape(1, 3, 3, 390, 390, 128),
            win(Some(50), Some(20), 0),
            AttentionOptions {
                overlap: Some(false),
                ..persistent()
            },
        ),
        (
            "persistent causal rows empty d128 offset -300",
            shape(1, 4, 4, 700, 700, 128),
            win(None, Some(0), -300),
            persistent(),
        ),
        (
            "persistent blocks random 50% d128 per-head 500x400",
            shape(2, 2, 2, 500, 400, 128),
            blocks(2, 2, random_tokens(0.5, 21)),
            persistent(),
        ),
        (
            "persistent blocks rows fully masked d128 700x300",
            shape(1, 3, 3, 700, 300, 128),
            blocks(
                1,
                1,
                Arc::new(|_, _, i, j| i % 7 != 3 && (i + 2 * j) % 5 != 0 && (i / 64) % 3 != 1),
            ),
            persistent(),
        ),
        (
            "persistent blocks empty mask d128 300x300",
            shape(1, 2, 2, 300, 300, 128),
            blocks(1, 1, Arc::new(|_, _, _, _| false)),
            persistent(),
        ),
        (
            "persistent documents causal ragged d128 gqa 4/2",
            shape(2, 4, 2, 1000, 1000, 128),
            docs(&[1, 200, 127, 129, 300, 1, 242], true),
            persistent(),
        ),
        (
            "persistent fp16 blocks block-sparse d128 640x640",
            shape(1, 2, 2, 640, 640, 128),
            blocks(1, 2, block_sparse(0.3, 0.5, 22)),
            AttentionOptions {
                dtype: Some(ActDtype::F16),
                ..persistent()
            },
        ),
        // O in [B, Sq, H, D] memory: the staged epilogue through o's strides on the one-tile
        // grid, the documents grid (a document's rows), persistent CTAs, the split-KV
        // combine and the 64-token tile.
        (
            "bshd O causal d128 gqa 4/2 batch 2 300x300",
            shape(2, 4, 2, 300, 300, 128),
            CaseMask::Window(Window::causal()),
            bshd_out(shape(2, 4, 2, 300, 300, 128), def),
        ),
        (
            "bshd O dense d64 odd 197x333",
            shape(2, 3, 3, 197, 333, 64),
            CaseMask::Window(Window::NONE),
            bshd_out(shape(2, 3, 3, 197, 333, 64), def),
        ),
        (
            "bshd O dense d256 gqa 4/2 200x333",
            shape(1, 4, 2, 200, 333, 256),
            CaseMask::Window(Window::NONE),
            bshd_out(shape(1, 4, 2, 200, 333, 256), def),
        ),
        (
            "bshd O documents causal ragged d128 batch 2",
            shape(2, 2, 2, 1000, 1000, 128),
            docs(&[1, 200, 127, 129, 300, 1, 242], true),
            bshd_out(shape(2, 2, 2, 1000, 1000, 128), def),
        ),
        (
            "bshd O persistent blocks random 50% d128 per-head 500x400",
            shape(2, 2, 2, 500, 400, 128),
            blocks(2, 2, random_tokens(0.5, 21)),
            bshd_out(shape(2, 2, 2, 500, 400, 128), persistent()),
        ),
        (
            "bshd O split 3 causal bottom-right d128 gqa 6/3 batch 2 130x900",
            shape(2, 6, 3, 130, 900, 128),
            win(None, Some(0), 770),
            bshd_out(shape(2, 6, 3, 130, 900, 128), split(3)),
        ),
        (
            "bshd O blocks 64-token lists 10% d128 per-head odd 900x1500",
            shape(2, 2, 2, 900, 1500, 128),
            blocks(2, 2, blocks64(0.1, 22)),
            bshd_out(shape(2, 2, 2, 900, 1500, 128), def),
        ),
        (
            "tail 5 of 24 tiles split 2 dense d128 gqa 4/2 odd 700x900",
            shape(1, 4, 2, 700, 900, 128),
            CaseMask::Window(Window::NONE),
            tail(5, 2),
        ),
        (
            "tail 7 of 24 tiles split 3 causal d64 batch 2 1000x1000 (empty splits)",
            shape(2, 2, 2, 1000, 1000, 64),
            CaseMask::Window(Window::causal()),
            tail(7, 3),
        ),
        (
            "tail 4 of 12 tiles split 2 blocks random 50% d128 per-head 300x400",
            shape(2, 2, 2, 300, 400, 128),
            blocks(2, 2, random_tokens(0.5, 23)),
            tail(4, 2),
        ),
        (
            "tail 12 of 12 tiles split 4 fp16 window 100/0 d256 300x700",
            shape(1, 4, 4, 300, 700, 256),
            win(Some(100), Some(0), 400),
            AttentionOptions {
                dtype: Some(ActDtype::F16),
                ..tail(12, 4)
            },
        ),
        (
            "bshd O tail 3 of 16 tiles split 2 dense d128 500x400",
            shape(2, 2, 2, 500, 400, 128),
            CaseMask::Window(Window::NONE),
            bshd_out(shape(2, 2, 2, 500, 400, 128), tail(3, 2)),
        ),
        // Masks left on the GPU: the kernel checks the lists' density when it runs at head dims
        // 64 and 256 (dense random tokens, and lists that are not dense), and reads them at 128.
        (
            "device count random d128 gqa 4/2 odd 300x520",
            shape(1, 4, 2, 300, 520, 128),
            blocks(1, 4, random_tokens(0.5, 31)),
            on_device,
        ),
        (
            "device count random d64 odd 333x700",
            shape(2, 2, 2, 333, 700, 64),
            blocks(2, 2, random_tokens(0.5, 32)),
            on_device,
        ),
        (
            "device count random d256 gqa 4/2 200x333",
            shape(1, 4, 2, 200, 333, 256),
            blocks(1, 1, random_tokens(0.3, 33)),
            on_device,
        ),
        (
            "device count block-sparse d64 gqa 4/2 odd 300x650",
            shape(1, 4, 2, 300, 650, 64),
            blocks(1, 4, block_sparse(0.3, 0.5, 34)),
            on_device,
        ),
        (
            "device count block-sparse d256 333x400",
            shape(1, 2, 2, 333, 400, 256),
            blocks(1, 2, block_sparse(0.4, 0.5, 36)),
            on_device,
        ),
        (
            "device count split 3 random d64 130x1500",
            shape(1, 2, 2, 130, 1500, 64),
            blocks(1, 2, random_tokens(0.5, 35)),
            AttentionOptions {
                splits: Some(3),
                ..on_device
            },
        ),
        (
            "bshd O fp16 causal d64 257x257",
            shape(1, 2, 2, 257, 257, 64),
            CaseMask::Window(Window::causal()),
            bshd_out(
                shape(1, 2, 2, 257, 257, 64),
                AttentionOptions {
                    dtype: Some(ActDtype::F16),
                    ..def
                },
            ),
        ),
    ];
    cases
        .drain(..)
        .map(|(name, shape, mask, opts)| Case {
            name: name.to_string(),
            shape,
            mask,
            opts,
        })
        .collect()
}

/// The default sweep on `geometry`: every case of [`default_cases`] whose head dim and
/// options the geometry supports (for example, 64 x 64 has no ping-pong and fewer stages),
/// named with the tile.
pub fn cases_for(geometry: Geometry) -> Vec<Case> {
    default_cases()
        .into_iter()
        .filter_map(|mut case| {
            case.opts.geometry = Some(geometry);
            // The shared-K/V tile runs one split on the one-tile grid, from host lists.
            if geometry.shared_kv()
                && (case.opts.splits.is_some_and(|n| n > 1)
                    || case.opts.persistent.is_some()
                    || case.opts.mask_on_device_only)
            {
                return None;
            }
            let k =
                kernel_config(case.shape.head_dim, case.mask.mode(), geometry, &case.opts).ok()?;
            // A persistent case runs only where the geometry has room for its second Q buffer.
            if case.opts.persistent == Some(true) {
                k.with_persistent(true).ok()?;
            }
            // A split-tail case runs on the geometries with a one-tile grid, its tail at most
            // the geometry's work tiles.
            if let Some(tail) = case.opts.tail.as_mut() {
                k.with_split_kv(true).with_tail_split(true).ok()?;
                let s = &case.shape;
                let tiles = geometry.m_blocks(s.seqlen_q as u32) as usize * s.heads * s.batch;
                tail.tiles = tail.tiles.min(u32::try_from(tiles).ok()?);
            }
            case.name = format!("[{}] {}", geometry.name(), case.name);
            Some(case)
        })
        .collect()
}

/// Runs one case on the GPU and compares with the CPU reference.
pub fn run_case(
    runner: &AttentionRunner,
    case: &Case,
    seed: u64,
) -> Result<CaseResult, AttentionError> {
    let s = case.shape;
    let mut rng = Lcg(seed ^ 0x5DEECE66D);
    let fp16 = case.opts.dtype == Some(ActDtype::F16);
    let to_bits = |x: f32| {
        if fp16 {
            half::f16::from_f32(x).to_bits()
        } else {
            f32_to_bf16(x)
        }
    };
    let from_bits = |b: u16| if fp16 { f16_to_f32(b) } else { bf16_to_f32(b) };
    let mut gen = |n: usize| -> (Vec<u16>, Vec<f32>) {
        let bits: Vec<u16> = (0..n).map(|_| to_bits(rng.normal())).collect();
        let vals = bits.iter().map(|&b| from_bits(b)).collect();
        (bits, vals)
    };
    let (qb, qf) = gen(s.q_shape().iter().product());
    let (kb, kf) = gen(s.kv_shape().iter().product());
    let (vb, vf) = gen(s.kv_shape().iter().product());
    let q = runner.upload_bf16(&qb, s.q_shape())?;
    let k = runner.upload_bf16(&kb, s.kv_shape())?;
    let v = runner.upload_bf16(&vb, s.kv_shape())?;

    let host_mask: Option<PackedMask> = match &case.mask {
        CaseMask::Window(_) => None,
        CaseMask::Blocks {
            batch,
            heads,
            visible,
        } => {
            let geometry = call_geometry(s.head_dim, None, &case.opts)?;
            Some(pack_case(
                &case.name, *batch, *heads, &s, visible, &geometry,
            )?)
        }
        CaseMask::Documents { lengths, causal } => {
            let geometry = call_geometry(s.head_dim, None, &case.opts)?;
            Some(pack_documents(&case.name, &s, lengths, *causal, &geometry)?)
        }
    };
    let device_mask = host_mask
        .as_ref()
        .map(|m| runner.upload_block_mask(m))
        .transpose()?;
    let mask = match (&case.mask, &device_mask) {
        (CaseMask::Window(w), _) => Mask::Window(*w),
        (_, Some(m)) => Mask::Blocks(m),
        _ => unreachable!("blocks case always has a device mask"),
    };
    let mode;
    let ran_persistent;
    let mut entries = ListEntries::Read;
    // A mask left on the GPU: its geometry on the host, the count on the device.
    let on_device = match (&host_mask, case.opts.mask_on_device_only) {
        (Some(m), true) => Some(left_on_device(runner.stream(), m, &case.name)?),
        _ => None,
    };

    let mut out = runner.alloc_output(&s)?;
    let stream = runner.stream();
    let d_err = driver;
    stream
        .memcpy_htod(&vec![0xFFFFu16; out.o.data.len()], &mut out.o.data)
        .map_err(d_err("poisoning O"))?;
    stream
        .memcpy_htod(&vec![f32::NAN; out.lse.len()], &mut out.lse)
        .map_err(d_err("poisoning lse"))?;
    if fp16 || case.opts.out_strides.is_some() || on_device.is_some() {
        // fp16 runs through a plan over raw addresses (the typed DeviceTensor API is
        // bf16), unsplit unless the case asks for splits; so does O in other strides (the
        // plan path a Python layout="bshd" call takes; the CLI's --out-layout checks prepare's).
        let raw = |t: &fragmask_host::attention::DeviceTensor<u16>| {
            RawTensor::contiguous(t.data.device_ptr(stream).0, t.shape)
        };
        let raw_mask = match (&mask, &device_mask, &on_device) {
            (Mask::Window(w), ..) => RawMask::Window(*w),
            (_, Some(m), Some((geometry, count))) => RawMask::Blocks(
                geometry,
                m.device_lists(stream)
                    .with_partial_count(count.device_ptr(stream).0),
            ),
            (_, Some(m), None) => RawMask::Blocks(&m.host, m.device_lists(stream)),
            _ => unreachable!("blocks case always has a device mask"),
        };
        let opts = AttentionOptions {
            splits: Some(case.opts.splits.unwrap_or(1)),
            ..case.opts
        };
        let plan = runner.plan(&raw(&q), &raw(&k), &raw(&v), &raw_mask, &opts)?;
        mode = plan.kernel.mask();
        ran_persistent = plan.persistent();
        entries = plan.kernel.list_entries();
        let workspace = SplitWorkspace::new(stream, &plan)?;
        let (ws_o, ws_lse) = workspace.device_ptrs(stream);
        let ptrs = PlanPointers {
            q: raw(&q).ptr,
            k: raw(&k).ptr,
            v: raw(&v).ptr,
            o: out.o.data.device_ptr(stream).0,
            lse: out.lse.device_ptr(stream).0,
            ws_o,
            ws_lse,
        };
        // SAFETY: q, k, v, the mask lists, the outputs and the workspace are live
        // allocations of this runner's context sized for `s` and the plan, and they
        // outlive the synchronize below.
        unsafe { plan.run(stream, &ptrs) }?;
    } else {
        let launch = runner.prepare(&q, &k, &v, &mask, &case.opts, &mut out)?;
        mode = launch.kernel.mask();
        ran_persistent = launch.kernel.persistent();
        launch.launch()?;
    }
    stream
        .synchronize()
        .map_err(d_err("running the attention kernel"))?;
    let o_bits = stream.clone_dtoh(&out.o.data).map_err(d_err("reading O"))?;
    // O in the case's strides, gathered back into [B, H, Sq, D] order.
    let o_bits = match case.opts.out_strides {
        None => o_bits,
        Some(st) => strides::gather_contiguous(&o_bits, s.q_shape(), st).ok_or_else(|| {
            AttentionError::Shape(format!(
                "{}: O strides {st:?} reach past the output buffer",
                case.name
            ))
        })?,
    };
    let lse = stream.clone_dtoh(&out.lse).map_err(d_err("reading lse"))?;

    let scale = case
        .opts
        .scale
        .map_or(1.0 / (s.head_dim as f64).sqrt(), f64::from);
    let reference = attention_reference(&s, &qf, &kf, &vf, scale, |b, h, i, j| {
        match (&case.mask, &host_mask) {
            // The packed mask the kernel read (batch and head broadcast where stored as 1).
            (_, Some(m)) => m.get(b, h, i, j),
            (CaseMask::Window(w), None) => j < s.seqlen_k && w.is_visible(i, j),
            (CaseMask::Blocks { .. } | CaseMask::Documents { .. }, None) => false,
        }
    });

    let (mut diff, mut norm, mut bad) = (0.0f64, 0.0f64, 0usize);
    for (&bits, &r) in o_bits.iter().zip(&reference.o) {
        let x = f64::from(from_bits(bits));
        if !x.is_finite() {
            bad += 1;
            continue;
        }
        diff += (x - r) * (x - r);
        norm += r * r;
    }
    let rel_err = if norm > 0.0 {
        (diff / norm).sqrt()
    } else {
        diff.sqrt()
    };
    let (mut lse_err, mut empty_row_errors) = (0.0f64, 0usize);
    let d = s.head_dim;
    for (row, (&got, &want)) in lse.iter().zip(&reference.lse).enumerate() {
        if want == f64::NEG_INFINITY {
            let o_zero = o_bits[row * d..(row + 1) * d]
                .iter()
                .all(|&b| b == 0 || b == 0x8000);
            if got != f32::NEG_INFINITY || !o_zero {
                empty_row_errors += 1;
            }
        } else if !got.is_finite() {
            bad += 1;
        } else {
            lse_err = lse_err.max((f64::from(got) - want).abs() / want.abs().max(1.0));
        }
    }
    // A case names the mode it tests: a documents case that fell back to the lists fails.
    let passed = bad == 0
        && empty_row_errors == 0
        && rel_err < O_TOLERANCE
        && lse_err < 2e-2
        && (case.mask.mode() != MaskMode::Documents || mode == MaskMode::Documents)
        && (case.opts.persistent != Some(true) || ran_persistent)
        && (on_device.is_none()
            || (entries == ListEntries::DenseAtRunTime)
                == RUN_TIME_DENSITY_HEAD_DIMS.contains(&(s.head_dim as u32)));
    Ok(CaseResult {
        name: case.name.clone(),
        rel_err,
        lse_err,
        bad_values: bad,
        empty_row_errors,
        partial_tiles: host_mask.map_or(0, |m| m.partial_tiles()),
        mode,
        persistent: ran_persistent,
        passed,
    })
}

/// `mask` as a GPU pack left on the device is planned: what the host holds of it, its
/// geometry with no tile (`PackedMask::geometry_only`, the Python extension's placeholder),
/// and its partial-tile count uploaded as the GPU packer leaves it (`RawMaskLists::partial_count`).
pub fn left_on_device(
    stream: &Arc<CudaStream>,
    mask: &PackedMask,
    name: &str,
) -> Result<(PackedMask, CudaSlice<i32>), AttentionError> {
    let geometry = PackedMask::geometry_only(mask.accumulator(), mask.encoding(), mask.shape())
        .map_err(AttentionError::Masks)?;
    let partial = mask.partial_tiles();
    let count = i32::try_from(partial)
        .map_err(|_| AttentionError::Shape(format!("{name}: {partial} partial tiles")))?;
    let count = stream
        .clone_htod(&[count])
        .map_err(driver("uploading the partial-tile count"))?;
    Ok((geometry, count))
}

/// Packs documents of `lengths` (causal or full within each) from the document-id
/// predicate, as `--predicate causal,doc=ids.npy` does, and checks that the packed mask
/// kept the documents and decodes to them everywhere (the backward's selftest packs its
/// documents cases here too).
pub(crate) fn pack_documents(
    name: &str,
    s: &AttentionShape,
    lengths: &[usize],
    causal: bool,
    geometry: &Geometry,
) -> Result<PackedMask, AttentionError> {
    let ids: Vec<i64> = lengths
        .iter()
        .enumerate()
        .flat_map(|(d, &len)| std::iter::repeat_n(d as i64, len))
        .collect();
    if ids.len() != s.seqlen_q || s.seqlen_q != s.seqlen_k {
        return Err(AttentionError::Mask(format!(
            "case {name}: documents of {} tokens for {}x{}",
            ids.len(),
            s.seqlen_q,
            s.seqlen_k
        )));
    }
    let documents = DocPredicate::Document(DocumentIds::new(&ids));
    let predicate = if causal {
        DocPredicate::causal() & documents
    } else {
        documents
    };
    let source =
        PredicateMask::new(s.seqlen_q, s.seqlen_k, predicate).map_err(AttentionError::Masks)?;
    let packed = pack_for_kernel(&source, geometry)?;
    let Some(docs) = packed.documents() else {
        return Err(AttentionError::Mask(format!(
            "case {name}: the packed mask lost its documents"
        )));
    };
    let sk = s.seqlen_k;
    let plane = packed.decode_plane(0, 0);
    if let Some(at) = (0..s.seqlen_q * sk).find(|&x| plane[x] != docs.is_visible(x / sk, x % sk)) {
        return Err(AttentionError::Mask(format!(
            "case {name}: the packed mask differs from its documents at (q {}, k {})",
            at / sk,
            at % sk
        )));
    }
    Ok(packed)
}

/// Packs a case's predicate over `batch x heads` (1 broadcasts) with the masks crate's
/// packer, and checks that the packed mask decodes to the predicate everywhere.
fn pack_case(
    name: &str,
    batch: usize,
    heads: usize,
    s: &AttentionShape,
    visible: &Predicate,
    geometry: &Geometry,
) -> Result<PackedMask, AttentionError> {
    let shape =
        MaskShape::new(batch, heads, s.seqlen_q, s.seqlen_k).map_err(AttentionError::Masks)?;
    let vis = Arc::clone(visible);
    let packed = pack_for_kernel(
        &FnMask::new(shape, move |b, h, i, j| vis(b, h, i, j)),
        geometry,
    )?;
    for b in 0..batch {
        for h in 0..heads {
            let plane = packed.decode_plane(b, h);
            let (sq, sk) = (s.seqlen_q, s.seqlen_k);
            if let Some(at) = (0..sq * sk).find(|&x| plane[x] != visible(b, h, x / sk, x % sk)) {
                return Err(AttentionError::Mask(format!(
                    "case {name}: the packed mask differs from its predicate at \
                     (b {b}, h {h}, q {}, k {})",
                    at / sk,
                    at % sk
                )));
            }
        }
    }
    Ok(packed)
}
