//! Correctness sweep of the GPU backward against the CPU f64 reference
//! (`attention_backward_reference`), used by `tests/attention_gpu.rs` and
//! `fragmask attention --selftest`.
//!
//! Every case draws random Q, K, V and dO, computes O and lse with the CPU f64 forward
//! (rounded to the kernel's types, so the case checks the backward alone), poisons the
//! gradients with NaN, runs the backward and passes only if no NaN is left, each of dQ, dK,
//! dV is within `||x - ref|| / ||ref|| < 2e-2`, and the dQ rows of queries with no visible
//! key are exactly 0. Block-mask cases pack their predicate with the masks crate's packer at
//! the case's tile, with the transposed lists; the reference reads the packed mask.
//! Documents cases pack a causal or full document predicate (which keeps its document
//! boundaries) and fail unless the backward ran the documents grid, where the call allows
//! it (not deterministic, not the raw-pointer launch of the fp16 cases, which run the
//! tile lists of the same mask).
//! Cases with `lists_on_device` plan the mask as a GPU pack left on the device is planned
//! (the host holds its geometry only, `selftest::left_on_device` with empty transposed lists,
//! and the transposed lists come with their partial-tile count on the device) and fail unless
//! the deterministic kernel, and only it, checks the lists' density when it runs
//! (`ListEntries::DenseAtRunTime`).

use std::sync::Arc;

use fragmask_host::cudarc::driver::DevicePtr;
use fragmask_kernels::attention::backward::{BackwardMask, STEP_M, WIDE_STEP_M};
use fragmask_kernels::attention::{ActDtype, Geometry, ListEntries};
use fragmask_masks::{MaskShape, PackOptions, TransposedLists};

use fragmask_host::attention::backward::{
    BackwardOptions, BackwardPointers, BackwardWorkspace, DqReduce, GradStrides, RawBackwardMask,
    RawGradients,
};
use fragmask_host::attention::blockmask::{check_fits, pack_for_kernel, FnMask};
use fragmask_host::attention::{
    driver, strides, AttentionError, AttentionRunner, AttentionShape, Mask, PackedMask, RawTensor,
    Window,
};

use super::reference::{attention_backward_reference, attention_reference};
use crate::numeric::{bf16_to_f32, f16_to_f32, f32_to_bf16};
use crate::synthetic::Predicate;

/// Tolerance on the relative L2 error of each gradient.
pub const GRAD_TOLERANCE: f64 = 2e-2;

/// How a backward case masks.
#[derive(Clone)]
pub enum BackwardCaseMask {
    /// Computed in the kernel.
    Window(Window),
    /// Packed at `tile` (with transposed lists) over `batch x heads` (1 broadcasts).
    Blocks {
        /// The mask's tile (one the backward reads: 128x128, 64x64, 128x64).
        tile: Geometry,
        /// Mask batch extent.
        batch: usize,
        /// Mask head extent.
        heads: usize,
        /// Visibility.
        visible: Predicate,
    },
    /// Contiguous documents of these lengths (summing to `Sq == Sk`), causal or full
    /// within each, packed at 128x128 from the document-id predicate (with the transposed
    /// lists), so the mask keeps its documents.
    Documents {
        /// Tokens of each document.
        lengths: Vec<usize>,
        /// Causal within each document (else full).
        causal: bool,
    },
}

/// One backward case.
#[derive(Clone)]
pub struct BackwardCase {
    /// Short description.
    pub name: String,
    /// Extents.
    pub shape: AttentionShape,
    /// Mask.
    pub mask: BackwardCaseMask,
    /// Options.
    pub opts: BackwardOptions,
    /// Runs (> 1: the gradients must be bit-identical across runs, deterministic mode).
    pub runs: usize,
    /// The mask planned as a GPU pack left on the device: the host holds its geometry only
    /// and the transposed lists come with their partial-tile count, which the deterministic
    /// kernel checks when it runs (the case fails unless it ran `ListEntries::DenseAtRunTime`
    /// exactly in the deterministic mode).
    pub lists_on_device: bool,
}

/// The outcome of one case.
#[derive(Debug, Clone)]
pub struct BackwardCaseResult {
    /// Case name.
    pub name: String,
    /// Relative L2 errors of dQ, dK, dV.
    pub rel_err: [f64; 3],
    /// NaN or infinite values in the gradients.
    pub bad_values: usize,
    /// Elements of dQ rows with no visible key that are not 0.
    pub empty_row_errors: usize,
    /// Runs whose gradients differ in some bit from the first run's.
    pub nondeterministic_runs: usize,
    /// Whether the backward ran the documents grid.
    pub documents_grid: bool,
    /// Verdict.
    pub passed: bool,
}

fn shape(b: usize, h: usize, hkv: usize, sq: usize, sk: usize, d: usize) -> AttentionShape {
    AttentionShape {
        batch: b,
        heads: h,
        kv_heads: hkv,
        seqlen_q: sq,
        seqlen_k: sk,
        head_dim: d,
    }
}

fn window(left: Option<u32>, right: Option<u32>, diag_offset: i32) -> BackwardCaseMask {
    BackwardCaseMask::Window(Window {
        left,
        right,
        diag_offset,
    })
}

fn blocks(tile: Geometry, heads: usize, visible: Predicate) -> BackwardCaseMask {
    BackwardCaseMask::Blocks {
        tile,
        batch: 1,
        heads,
        visible,
    }
}

fn documents(lengths: &[usize], causal: bool) -> BackwardCaseMask {
    BackwardCaseMask::Documents {
        lengths: lengths.to_vec(),
        causal,
    }
}

fn random(keep: f64, seed: u64) -> Predicate {
    crate::synthetic::random_tokens(keep, seed)
}

/// The default sweep: odd lengths, GQA 1/2/4, causal and windows, 128x128 and 64x64 masks,
/// fully masked rows, empty and full masks, head dims 64/128/256, fp16, and the
/// deterministic mode over 10 runs.
pub fn default_cases() -> Vec<BackwardCase> {
    let t128 = Geometry::TILE_128X128;
    let t64 = Geometry::TILE_64X64;
    let det = BackwardOptions {
        deterministic: true,
        ..BackwardOptions::default()
    };
    let f16 = BackwardOptions {
        dtype: Some(ActDtype::F16),
        ..BackwardOptions::default()
    };
    let none = window(None, None, 0);
    let red = BackwardOptions {
        dq_reduce: Some(DqReduce::Atomics),
        ..BackwardOptions::default()
    };
    let red_det = BackwardOptions {
        deterministic: true,
        ..red
    };
    let red_fragment = BackwardOptions {
        dq_reduce: Some(DqReduce::FragmentAtomics),
        ..BackwardOptions::default()
    };
    // Head dim 64's 128-query step (BackwardKernel::with_step_m): window walks, the
    // documents grid and 128x128 tile lists.
    let wide = BackwardOptions {
        step_m: Some(WIDE_STEP_M),
        ..BackwardOptions::default()
    };
    // The 64-query step at head dim 64 (K and V in registers), no longer the default there.
    let narrow = BackwardOptions {
        step_m: Some(STEP_M),
        ..BackwardOptions::default()
    };
    let wide_f16 = BackwardOptions {
        dtype: Some(ActDtype::F16),
        ..wide
    };
    let wide_red = BackwardOptions {
        dq_reduce: Some(DqReduce::Atomics),
        ..wide
    };
    // (the wide step's default reduction is fragment-order atomics; bulk when named)
    let wide_bulk = BackwardOptions {
        dq_reduce: Some(DqReduce::Bulk),
        ..wide
    };
    // The bulk reductions issued by the consumers themselves, without the writer warp
    // (the default issues them from it where it fits: BackwardKernel::with_dq_writer).
    let no_writer = BackwardOptions {
        dq_writer: Some(false),
        ..BackwardOptions::default()
    };
    // The window walk's launch order in sections of planes (BackwardOptions::head_section),
    // named so that small shapes take it: every key tile of every plane exactly once.
    let sections = |n| BackwardOptions {
        head_section: Some(n),
        ..BackwardOptions::default()
    };
    // A GQA group's query heads split over a cluster of CTAs per key tile
    // (BackwardOptions::group_slices), reduced through distributed shared memory.
    let slices = |n, section| BackwardOptions {
        group_slices: Some(n),
        head_section: section,
        ..BackwardOptions::default()
    };
    // Gradients written into [B, S, H, D] memory (a bshd caller's, BackwardOptions::grad_strides).
    let bshd = |name, shape: AttentionShape, mask, opts: BackwardOptions, runs| {
        let opts = BackwardOptions {
            grad_strides: Some(GradStrides::bshd(&shape)),
            ..opts
        };
        (name, shape, mask, opts, runs)
    };
    let paired = BackwardOptions {
        paired_keys: Some(true),
        ..BackwardOptions::default()
    };
    let mut cases = vec![
        bshd(
            "bshd grads: causal batch 2 gqa 4/2 300 d128",
            shape(2, 4, 2, 300, 300, 128),
            window(None, Some(0), 0),
            BackwardOptions::default(),
            1,
        ),
        bshd(
            "bshd grads: window 100:40 bottom-right batch 2 450x500 d64 (wide step)",
            shape(2, 2, 2, 450, 500, 64),
            window(Some(100), Some(40), 50),
            BackwardOptions::default(),
            1,
        ),
        bshd(
            "bshd grads: documents causal ragged gqa 4/2 d128",
            shape(1, 4, 2, 512, 512, 128),
            documents(&[100, 1, 157, 126, 128], true),
            BackwardOptions::default(),
            1,
        ),
        bshd(
            "bshd grads: group slices 2 causal batch 2 gqa 8/2 400 d128",
            shape(2, 8, 2, 400, 400, 128),
            window(None, Some(0), 0),
            slices(2, None),
            1,
        ),
        bshd(
            "bshd grads: paired key blocks [64x64] random 50% batch 2 odd 190x330 d128",
            shape(2, 2, 2, 190, 330, 128),
            blocks(t64, 2, random(0.5, 23)),
            paired,
            1,
        ),
        bshd(
            "bshd grads: [128x128] random 50% gqa 2 d256",
            shape(1, 4, 2, 300, 280, 256),
            blocks(t128, 4, random(0.5, 24)),
            BackwardOptions::default(),
            1,
        ),
        bshd(
            "bshd grads: fp16 causal (raw launch) batch 2 257 d64",
            shape(2, 2, 2, 257, 257, 64),
            window(None, Some(0), 0),
            f16,
            1,
        ),
        bshd(
            "bshd grads: dQ atomics causal bottom-right 150x260 d128",
            shape(1, 2, 2, 150, 260, 128),
            window(None, Some(0), 110),
            red,
            1,
        ),
        bshd(
            "bshd grads: dQ fragment-order atomics [128x128] random 50% gqa 2 d64",
            shape(1, 4, 2, 300, 280, 64),
            blocks(t128, 4, random(0.5, 25)),
            red_fragment,
            1,
        ),
        bshd(
            "bshd grads: deterministic causal x3 d128",
            shape(1, 2, 2, 384, 384, 128),
            window(None, Some(0), 0),
            det,
            3,
        ),
        (
            "group slices 2: causal batch 2 gqa 8/2 700 d128",
            shape(2, 8, 2, 700, 700, 128),
            window(None, Some(0), 0),
            slices(2, None),
            1,
        ),
        (
            "group slices 4 (one head each): causal bottom-right gqa 8/2 300x500 d128",
            shape(1, 8, 2, 300, 500, 128),
            window(None, Some(0), 200),
            slices(4, None),
            1,
        ),
        (
            "group slices 8 in launch sections of 4: causal batch 3 gqa 16/2 260 d128",
            shape(3, 16, 2, 260, 260, 128),
            window(None, Some(0), 0),
            slices(8, Some(4)),
            1,
        ),
        (
            "group slices 2: window 100:30 gqa 4/1 450 d128",
            shape(1, 4, 1, 450, 450, 128),
            window(Some(100), Some(30), 0),
            slices(2, None),
            1,
        ),
        (
            "group slices 2: no mask mqa 2/1 333x190 d128",
            shape(1, 2, 1, 333, 190, 128),
            window(None, None, 0),
            slices(2, None),
            1,
        ),
        (
            "launch sections of 3 planes (last narrower): causal batch 2 gqa 4/2 300 d128",
            shape(2, 4, 2, 300, 300, 128),
            window(None, Some(0), 0),
            sections(3),
            1,
        ),
        (
            "launch sections of 4 planes: causal bottom-right batch 3 gqa 4/2 200x330 d128",
            shape(3, 4, 2, 200, 330, 128),
            window(None, Some(0), 130),
            sections(4),
            1,
        ),
        (
            "launch sections of 3 planes: window 100:0 batch 2 d64 (wide step)",
            shape(2, 2, 2, 450, 450, 64),
            window(Some(100), Some(0), 0),
            sections(3),
            1,
        ),
        // The documents grid: lengths off the 64- and 128-token grids (steps straddling two
        // documents), one-token documents, a single document, a document longer than S/2;
        // causal and full within documents; GQA, head dims 64/128/256, dQ by atomics; the
        // deterministic mode and fp16's raw launch run the tile lists of the same masks.
        (
            "documents causal ragged d128 gqa 4/2",
            shape(1, 4, 2, 512, 512, 128),
            documents(&[100, 1, 157, 126, 128], true),
            BackwardOptions::default(),
            1,
        ),
        (
            "documents full ragged d128",
            shape(1, 2, 2, 400, 400, 128),
            documents(&[70, 200, 130], false),
            BackwardOptions::default(),
            1,
        ),
        (
            "documents causal single d64",
            shape(1, 2, 2, 300, 300, 64),
            documents(&[300], true),
            BackwardOptions::default(),
            1,
        ),
        (
            "documents causal long (> S/2) gqa 2 d256",
            shape(1, 2, 1, 400, 400, 256),
            documents(&[40, 300, 60], true),
            BackwardOptions::default(),
            1,
        ),
        (
            "documents full long (> S/2) one-token d64",
            shape(1, 2, 2, 256, 256, 64),
            documents(&[33, 1, 219, 3], false),
            BackwardOptions::default(),
            1,
        ),
        (
            "dQ atomics: documents causal d128",
            shape(1, 2, 2, 380, 380, 128),
            documents(&[90, 190, 100], true),
            red,
            1,
        ),
        (
            "fp16 documents causal (tile lists, raw launch) d128",
            shape(1, 2, 2, 380, 380, 128),
            documents(&[90, 190, 100], true),
            f16,
            1,
        ),
        (
            "deterministic documents causal (tile lists) x3 d128",
            shape(1, 2, 2, 380, 380, 128),
            documents(&[90, 190, 100], true),
            det,
            3,
        ),
        (
            "none d128",
            shape(1, 2, 2, 256, 256, 128),
            none.clone(),
            BackwardOptions::default(),
            1,
        ),
        (
            "none odd 200x317 d128",
            shape(1, 2, 2, 200, 317, 128),
            none.clone(),
            BackwardOptions::default(),
            1,
        ),
        (
            "causal bottom-right 300x300 d128",
            shape(2, 2, 2, 300, 300, 128),
            window(None, Some(0), 0),
            BackwardOptions::default(),
            1,
        ),
        (
            "no dQ writer warp: causal bottom-right 300x300 d128",
            shape(2, 2, 2, 300, 300, 128),
            window(None, Some(0), 0),
            no_writer,
            1,
        ),
        (
            "causal bottom-right 150x260 d128",
            shape(1, 2, 2, 150, 260, 128),
            window(None, Some(0), 110),
            BackwardOptions::default(),
            1,
        ),
        (
            "causal top-left 260x150 (empty rows) d128",
            shape(1, 1, 1, 260, 150, 128),
            window(None, Some(0), -130),
            BackwardOptions::default(),
            1,
        ),
        (
            "window 64:32 333 d64",
            shape(1, 2, 2, 333, 333, 64),
            window(Some(64), Some(32), 0),
            BackwardOptions::default(),
            1,
        ),
        // Sliding windows at head dim 128: the window's last step of a key tile holds no
        // visible pair for its lower 64 keys; with a right window and an offset, the first
        // steps none for its upper 64.
        (
            "window 300:0 700 d128",
            shape(1, 2, 2, 700, 700, 128),
            window(Some(300), Some(0), 0),
            BackwardOptions::default(),
            1,
        ),
        (
            "window 100:40 offset 30, 450x500 d128",
            shape(1, 2, 2, 450, 500, 128),
            window(Some(100), Some(40), 30),
            BackwardOptions::default(),
            1,
        ),
        (
            "gqa 2 causal 190 d128",
            shape(1, 4, 2, 190, 190, 128),
            window(None, Some(0), 0),
            BackwardOptions::default(),
            1,
        ),
        (
            "mqa 4 none 130x70 d64",
            shape(1, 4, 1, 130, 70, 64),
            none.clone(),
            BackwardOptions::default(),
            1,
        ),
        (
            "none d64",
            shape(1, 2, 2, 256, 192, 64),
            none.clone(),
            BackwardOptions::default(),
            1,
        ),
        (
            "none d256 odd 200x150",
            shape(1, 2, 2, 200, 150, 256),
            none.clone(),
            BackwardOptions::default(),
            1,
        ),
        (
            "causal d256 gqa 2",
            shape(1, 2, 1, 256, 256, 256),
            window(None, Some(0), 0),
            BackwardOptions::default(),
            1,
        ),
        (
            "fp16 causal 300 d128",
            shape(1, 2, 2, 300, 300, 128),
            window(None, Some(0), 0),
            f16,
            1,
        ),
        (
            "fp16 none d64",
            shape(1, 1, 1, 190, 190, 64),
            none.clone(),
            f16,
            1,
        ),
        // The 128-query step: lengths off the 128-row grid (TMA zero-fill, padded lse rows),
        // both causal alignments (empty rows), windows with offsets, GQA and MQA, fp16, and
        // each dQ reduction (two 64-query chunks per step, one per warpgroup).
        (
            "wide step: none 256x192 d64",
            shape(1, 2, 2, 256, 192, 64),
            none.clone(),
            wide,
            1,
        ),
        (
            "wide step: none odd 200x317 d64",
            shape(1, 2, 2, 200, 317, 64),
            none.clone(),
            wide,
            1,
        ),
        (
            "wide step: causal 300 d64",
            shape(1, 2, 2, 300, 300, 64),
            window(None, Some(0), 0),
            wide,
            1,
        ),
        (
            "wide step: causal top-left 260x150 (empty rows) d64",
            shape(1, 1, 1, 260, 150, 64),
            window(None, Some(0), -130),
            wide,
            1,
        ),
        (
            "wide step: causal bottom-right 190x400 d64",
            shape(1, 2, 2, 190, 400, 64),
            window(None, Some(0), 210),
            wide,
            1,
        ),
        (
            "wide step: window 64:32 333 d64",
            shape(1, 2, 2, 333, 333, 64),
            window(Some(64), Some(32), 0),
            wide,
            1,
        ),
        (
            "wide step: window 100:40 offset 30, 450x500 d64",
            shape(1, 2, 2, 450, 500, 64),
            window(Some(100), Some(40), 30),
            wide,
            1,
        ),
        (
            "wide step: gqa 2 causal 190 d64",
            shape(1, 4, 2, 190, 190, 64),
            window(None, Some(0), 0),
            wide,
            1,
        ),
        (
            "wide step: mqa 4 none 130x70 d64",
            shape(1, 4, 1, 130, 70, 64),
            none.clone(),
            wide,
            1,
        ),
        (
            "wide step: fp16 causal 300 d64",
            shape(1, 2, 2, 300, 300, 64),
            window(None, Some(0), 0),
            wide_f16,
            1,
        ),
        (
            "wide step: dQ atomics causal 300 d64",
            shape(1, 2, 2, 300, 300, 64),
            window(None, Some(0), 0),
            wide_red,
            1,
        ),
        (
            "wide step: dQ bulk reductions none 256x256 d64",
            shape(1, 2, 2, 256, 256, 64),
            none.clone(),
            wide_bulk,
            1,
        ),
        (
            "wide step: documents causal ragged gqa 4/2 d64",
            shape(1, 4, 2, 512, 512, 64),
            documents(&[100, 1, 157, 126, 128], true),
            wide,
            1,
        ),
        (
            "wide step: documents full ragged d64",
            shape(1, 2, 2, 400, 400, 64),
            documents(&[70, 200, 130], false),
            wide,
            1,
        ),
        (
            "64-query step: documents causal ragged d64",
            shape(1, 2, 2, 380, 380, 64),
            documents(&[90, 190, 100], true),
            narrow,
            1,
        ),
        (
            "wide step: [128x128] random 50% odd 300x280 d64",
            shape(1, 2, 2, 300, 280, 64),
            blocks(t128, 2, random(0.5, 31)),
            wide,
            1,
        ),
        (
            "wide step: [128x128] broadcast heads, rows q%7==0 masked, 200x333 d64",
            shape(1, 4, 2, 200, 333, 64),
            blocks(
                t128,
                1,
                Arc::new(|_, _, i: usize, j: usize| i % 7 != 0 && (i + 3 * j) % 5 != 0),
            ),
            wide,
            1,
        ),
        (
            "wide step: fp16 [128x128] random 40% (raw launch) d64",
            shape(1, 2, 2, 256, 256, 64),
            blocks(t128, 2, random(0.4, 32)),
            wide_f16,
            1,
        ),
        (
            "wide step: dQ bulk [128x128] random 50% gqa 2 d64",
            shape(1, 4, 2, 256, 256, 64),
            blocks(t128, 4, random(0.5, 33)),
            wide_bulk,
            1,
        ),
        (
            "64-query step: [128x128] random 50% odd 300x280 d64",
            shape(1, 2, 2, 300, 280, 64),
            blocks(t128, 2, random(0.5, 31)),
            narrow,
            1,
        ),
        (
            "64-query step: causal 300 d64",
            shape(1, 2, 2, 300, 300, 64),
            window(None, Some(0), 0),
            narrow,
            1,
        ),
        (
            "64-query step: window 64:32 odd 333x250 d64",
            shape(1, 2, 2, 333, 250, 64),
            window(Some(64), Some(32), 0),
            narrow,
            1,
        ),
        (
            "[128x128] random 50% 300x280 d128",
            shape(1, 2, 2, 300, 280, 128),
            blocks(t128, 2, random(0.5, 7)),
            BackwardOptions::default(),
            1,
        ),
        (
            "no dQ writer warp: [128x128] random 50% 300x280 d128",
            shape(1, 2, 2, 300, 280, 128),
            blocks(t128, 2, random(0.5, 7)),
            no_writer,
            1,
        ),
        (
            "no dQ writer warp: documents causal ragged d128",
            shape(1, 2, 2, 380, 380, 128),
            documents(&[90, 190, 100], true),
            no_writer,
            1,
        ),
        (
            "[128x128] random 30% gqa 4 d64",
            shape(1, 4, 1, 256, 256, 64),
            blocks(t128, 4, random(0.3, 8)),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x128] broadcast heads, rows q%7==0 masked d128",
            shape(1, 2, 2, 257, 257, 128),
            blocks(t128, 1, {
                let r = random(0.6, 9);
                Arc::new(move |b, h, i, j| i % 7 != 0 && r(b, h, i, j))
            }),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x128] empty mask d128",
            shape(1, 1, 1, 200, 200, 128),
            blocks(t128, 1, Arc::new(|_, _, _, _| false)),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x128] full mask d128",
            shape(1, 1, 1, 200, 260, 128),
            blocks(t128, 1, Arc::new(|_, _, _, _| true)),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x128] documents causal d128",
            shape(1, 2, 2, 384, 384, 128),
            blocks(t128, 1, Arc::new(|_, _, i, j| j <= i && i / 100 == j / 100)),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x128] random 50% d256",
            shape(1, 1, 1, 200, 256, 256),
            blocks(t128, 1, random(0.5, 10)),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x128] fp16 random 50% d128",
            shape(1, 2, 2, 256, 256, 128),
            blocks(t128, 2, random(0.5, 11)),
            f16,
            1,
        ),
        (
            "[64x64] random 50% d128",
            shape(1, 2, 2, 256, 320, 128),
            blocks(t64, 2, random(0.5, 12)),
            BackwardOptions::default(),
            1,
        ),
        (
            "no dQ writer warp: [64x64] random 50% d128",
            shape(1, 2, 2, 256, 320, 128),
            blocks(t64, 2, random(0.5, 12)),
            no_writer,
            1,
        ),
        (
            "[64x64] block lists 30% odd 250x200 d128",
            shape(1, 2, 2, 250, 200, 128),
            blocks(t64, 2, {
                let r = random(0.3, 13);
                Arc::new(move |b, h, i, j| r(b, h, i / 64, j / 64))
            }),
            BackwardOptions::default(),
            1,
        ),
        (
            "[64x64] random 50% d64",
            shape(1, 1, 1, 192, 192, 64),
            blocks(t64, 1, random(0.5, 14)),
            BackwardOptions::default(),
            1,
        ),
        (
            // 64 keys by 128 queries (`--block 128x64`): one 64-key warpgroup, two 64-query
            // steps per mask tile row.
            "[128x64] random 50% d128 odd 300x260",
            shape(1, 2, 2, 300, 260, 128),
            blocks(Geometry::TILE_128X64, 2, random(0.5, 22)),
            BackwardOptions::default(),
            1,
        ),
        (
            "[128x64] random 50% d256 odd 200x190",
            shape(1, 1, 1, 200, 190, 256),
            blocks(Geometry::TILE_128X64, 1, random(0.5, 23)),
            BackwardOptions::default(),
            1,
        ),
        (
            "paired key blocks off: [64x64] random 50% d128",
            shape(1, 2, 2, 256, 320, 128),
            blocks(t64, 2, random(0.5, 12)),
            BackwardOptions {
                paired_keys: Some(false),
                ..BackwardOptions::default()
            },
            1,
        ),
        (
            "paired key blocks: [64x64] 64-token blocks 15% gqa 4/2 one mask head 300x650 d128",
            shape(1, 4, 2, 300, 650, 128),
            blocks(t64, 1, {
                let r = random(0.15, 21);
                Arc::new(move |b, h, i, j| r(b, h, i / 64, j / 64))
            }),
            BackwardOptions {
                paired_keys: Some(true),
                ..BackwardOptions::default()
            },
            1,
        ),
        (
            "paired key blocks: [64x64] random 50% fp16 batch 2 odd 190x330 d64",
            shape(2, 2, 2, 190, 330, 64),
            blocks(t64, 2, random(0.5, 22)),
            BackwardOptions {
                paired_keys: Some(true),
                dtype: Some(ActDtype::F16),
                ..BackwardOptions::default()
            },
            1,
        ),
        (
            "[64x64] random 50% d256",
            shape(1, 1, 1, 192, 192, 256),
            blocks(t64, 1, random(0.5, 15)),
            BackwardOptions::default(),
            1,
        ),
        (
            "dQ atomics: causal bottom-right 150x260 d128",
            shape(1, 2, 2, 150, 260, 128),
            window(None, Some(0), 110),
            red,
            1,
        ),
        (
            "dQ atomics: [128x128] random 50% gqa 2 d128",
            shape(1, 4, 2, 300, 280, 128),
            blocks(t128, 4, random(0.5, 18)),
            red,
            1,
        ),
        (
            "dQ atomics: [64x64] random 50% d256",
            shape(1, 1, 1, 192, 192, 256),
            blocks(t64, 1, random(0.5, 19)),
            red,
            1,
        ),
        (
            "dQ fragment-order atomics: causal bottom-right 150x260 d128",
            shape(1, 2, 2, 150, 260, 128),
            window(None, Some(0), 110),
            red_fragment,
            1,
        ),
        (
            "dQ fragment-order atomics: [128x128] random 50% gqa 2 d64",
            shape(1, 4, 2, 300, 280, 64),
            blocks(t128, 4, random(0.5, 20)),
            red_fragment,
            1,
        ),
        (
            "dQ fragment-order atomics: deterministic causal x10 d256",
            shape(1, 2, 2, 256, 256, 256),
            window(None, Some(0), 0),
            BackwardOptions {
                deterministic: true,
                ..red_fragment
            },
            10,
        ),
        (
            "dQ atomics: deterministic causal x10 d128",
            shape(1, 2, 2, 384, 384, 128),
            window(None, Some(0), 0),
            red_det,
            10,
        ),
        (
            "deterministic causal x10 d128",
            shape(1, 2, 2, 512, 512, 128),
            window(None, Some(0), 0),
            det,
            10,
        ),
        (
            "deterministic causal x10 d128, the consumers' turns (no dQ writer warp)",
            shape(1, 2, 2, 512, 512, 128),
            window(None, Some(0), 0),
            BackwardOptions {
                dq_writer: Some(false),
                ..det
            },
            10,
        ),
        (
            "deterministic [128x128] block-sparse x5 d128, the consumers' turns (no dQ writer warp)",
            shape(2, 3, 3, 300, 650, 128),
            blocks(t128, 3, crate::synthetic::block_sparse(0.3, 0.5, 48)),
            BackwardOptions {
                dq_writer: Some(false),
                ..det
            },
            5,
        ),
        (
            "deterministic no mask x10 d128 (ragged lengths)",
            shape(1, 2, 2, 700, 650, 128),
            window(None, None, 0),
            det,
            10,
        ),
        (
            "deterministic no mask gqa 2 x10 d128, fewer steps than key tiles",
            shape(1, 4, 2, 100, 1000, 128),
            window(None, None, 0),
            det,
            10,
        ),
        (
            "deterministic sliding window 150,90 x10 d128",
            shape(1, 2, 2, 900, 900, 128),
            window(Some(150), Some(90), 0),
            det,
            10,
        ),
        (
            "deterministic causal bottom-right, 140 key tiles (more than SMs) x3 d64",
            shape(1, 1, 1, 256, 17920, 64),
            window(None, Some(0), 17920 - 256),
            det,
            3,
        ),
        (
            "deterministic no mask, 140 key tiles (more than SMs) x3 d64",
            shape(1, 1, 1, 200, 17920, 64),
            window(None, None, 0),
            det,
            3,
        ),
        (
            "deterministic [128x128] random 50% x10 d128",
            shape(1, 2, 2, 384, 384, 128),
            blocks(t128, 2, random(0.5, 16)),
            det,
            10,
        ),
        (
            "deterministic causal gqa 2, 3 KV heads x batch 2 (6 planes interleaved) x5 d128",
            shape(2, 6, 3, 384, 384, 128),
            window(None, Some(0), 0),
            det,
            5,
        ),
        (
            "deterministic [128x128] block-sparse 3 heads x batch 2, sections of 4 planes x5 d128",
            shape(2, 3, 3, 300, 650, 128),
            blocks(t128, 3, crate::synthetic::block_sparse(0.3, 0.5, 47)),
            BackwardOptions {
                head_section: Some(4),
                ..det
            },
            5,
        ),
        (
            "deterministic [64x64] block-sparse x5 d128 (the 64-token tile's one warpgroup, unpaired)",
            shape(1, 2, 2, 384, 640, 128),
            blocks(t64, 2, crate::synthetic::block_sparse(0.3, 0.5, 49)),
            BackwardOptions {
                paired_keys: Some(false),
                ..det
            },
            5,
        ),
        (
            "deterministic [64x64] paired block-sparse x5 d128 odd 11 key blocks",
            shape(1, 2, 2, 384, 700, 128),
            blocks(t64, 2, crate::synthetic::block_sparse(0.3, 0.5, 53)),
            BackwardOptions {
                paired_keys: Some(true),
                ..det
            },
            5,
        ),
        (
            "deterministic [64x64] paired block-sparse, the consumers' turns x5 d128",
            shape(1, 2, 2, 384, 640, 128),
            blocks(t64, 2, crate::synthetic::block_sparse(0.3, 0.5, 55)),
            BackwardOptions {
                paired_keys: Some(true),
                dq_writer: Some(false),
                ..det
            },
            5,
        ),
        (
            "deterministic [64x64] paired random 50% odd 11 key blocks, the consumers' turns x5 d64",
            shape(1, 2, 2, 256, 700, 64),
            blocks(t64, 2, random(0.5, 56)),
            BackwardOptions {
                paired_keys: Some(true),
                ..det
            },
            5,
        ),
        (
            "deterministic [64x64] paired random 50% gqa 4/2 one mask head batch 2 x5 d128",
            shape(2, 4, 2, 300, 650, 128),
            blocks(t64, 1, random(0.5, 54)),
            BackwardOptions {
                paired_keys: Some(true),
                ..det
            },
            5,
        ),
        (
            "deterministic [64x64] random 50% x5 d64 (the 64-token tile's one warpgroup)",
            shape(1, 2, 2, 384, 384, 64),
            blocks(t64, 2, random(0.5, 18)),
            det,
            5,
        ),
        (
            "deterministic [64x64] random 50% x10 d256",
            shape(1, 1, 1, 256, 256, 256),
            blocks(t64, 1, random(0.5, 17)),
            det,
            10,
        ),
    ];
    cases
        .drain(..)
        .map(|(name, shape, mask, opts, runs)| BackwardCase {
            name: name.to_string(),
            shape,
            mask,
            opts,
            runs,
            lists_on_device: false,
        })
        .chain(device_count_cases())
        .collect()
}

/// Masks left on the GPU ([`BackwardCase::lists_on_device`]): dense random tokens at every
/// head dim and in the deterministic mode, and lists that are not dense.
fn device_count_cases() -> Vec<BackwardCase> {
    let t128 = Geometry::TILE_128X128;
    let det = BackwardOptions {
        deterministic: true,
        ..BackwardOptions::default()
    };
    let def = BackwardOptions::default();
    let sweep = crate::synthetic::block_sparse(0.3, 0.5, 44);
    [
        (
            "device count random 50% gqa 4/2 odd 300x520 d128",
            shape(1, 4, 2, 300, 520, 128),
            blocks(t128, 4, random(0.5, 41)),
            def,
            1,
        ),
        (
            "device count random 50% odd 333x700 d64",
            shape(1, 2, 2, 333, 700, 64),
            blocks(t128, 2, random(0.5, 42)),
            def,
            1,
        ),
        (
            "device count random 30% gqa 4/2 200x333 d256",
            shape(1, 4, 2, 200, 333, 256),
            blocks(t128, 1, random(0.3, 43)),
            def,
            1,
        ),
        (
            "device count block-sparse gqa 4/2 odd 300x650 d128",
            shape(1, 4, 2, 300, 650, 128),
            blocks(t128, 4, sweep.clone()),
            def,
            1,
        ),
        (
            "device count deterministic random 50% x5 odd 300x520 d128",
            shape(1, 2, 2, 300, 520, 128),
            blocks(t128, 2, random(0.5, 45)),
            det,
            5,
        ),
        (
            "device count deterministic block-sparse x5 odd 300x650 d128",
            shape(1, 2, 2, 300, 650, 128),
            blocks(t128, 2, sweep),
            det,
            5,
        ),
        (
            "device count deterministic random 50% x3 odd 333x700 d64",
            shape(1, 2, 2, 333, 700, 64),
            blocks(t128, 2, random(0.5, 46)),
            det,
            3,
        ),
    ]
    .into_iter()
    .map(|(name, shape, mask, opts, runs)| BackwardCase {
        name: name.to_string(),
        shape,
        mask,
        opts,
        runs,
        lists_on_device: true,
    })
    .collect()
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
    fn normal(&mut self) -> f32 {
        ((self.next() + self.next() + self.next() + self.next() - 2.0) * 3f64.sqrt()) as f32
    }
}

/// Packs a case's predicate at `tile` with the transposed lists (default backward
/// accumulator), checking that it decodes to the predicate.
fn pack_case(
    case: &BackwardCase,
    tile: &Geometry,
    batch: usize,
    heads: usize,
    visible: &Predicate,
) -> Result<PackedMask, AttentionError> {
    let s = case.shape;
    let shape =
        MaskShape::new(batch, heads, s.seqlen_q, s.seqlen_k).map_err(AttentionError::Masks)?;
    let vis = Arc::clone(visible);
    let mut packed = pack_for_kernel(&FnMask::new(shape, move |b, h, i, j| vis(b, h, i, j)), tile)?;
    let backward = TransposedLists::default_accumulator(packed.accumulator())
        .map_err(AttentionError::Masks)?;
    packed
        .add_transposed(&backward, &PackOptions::default())
        .map_err(AttentionError::Masks)?;
    for b in 0..batch {
        for h in 0..heads {
            let plane = packed.decode_plane(b, h);
            let sk = s.seqlen_k;
            if let Some(at) =
                (0..s.seqlen_q * sk).find(|&x| plane[x] != visible(b, h, x / sk, x % sk))
            {
                return Err(AttentionError::Mask(format!(
                    "case {}: the packed mask differs from its predicate at (q {}, k {})",
                    case.name,
                    at / sk,
                    at % sk
                )));
            }
        }
    }
    // The plan's own check, before the reference reads the mask at every head of the call.
    check_fits(&packed, &s)?;
    Ok(packed)
}

/// A case's mask packed as the backward reads it (with the transposed lists), or `None`
/// for a window.
fn case_mask(case: &BackwardCase) -> Result<Option<PackedMask>, AttentionError> {
    match &case.mask {
        BackwardCaseMask::Window(_) => Ok(None),
        BackwardCaseMask::Blocks {
            tile,
            batch,
            heads,
            visible,
        } => Ok(Some(pack_case(case, tile, *batch, *heads, visible)?)),
        BackwardCaseMask::Documents { lengths, causal } => {
            let mut packed = super::selftest::pack_documents(
                &case.name,
                &case.shape,
                lengths,
                *causal,
                &Geometry::TILE_128X128,
            )?;
            let backward = TransposedLists::default_accumulator(packed.accumulator())
                .map_err(AttentionError::Masks)?;
            packed
                .add_transposed(&backward, &PackOptions::default())
                .map_err(AttentionError::Masks)?;
            if packed.documents().is_none() {
                return Err(AttentionError::Mask(format!(
                    "case {}: the transposed lists lost the documents",
                    case.name
                )));
            }
            Ok(Some(packed))
        }
    }
}

/// Runs one case on the GPU and compares with the CPU reference.
pub fn run_case(
    runner: &AttentionRunner,
    case: &BackwardCase,
    seed: u64,
) -> Result<BackwardCaseResult, AttentionError> {
    let s = case.shape;
    let fp16 = case.opts.dtype == Some(ActDtype::F16);
    let to_bits = |x: f32| {
        if fp16 {
            half::f16::from_f32(x).to_bits()
        } else {
            f32_to_bf16(x)
        }
    };
    let from_bits = |b: u16| if fp16 { f16_to_f32(b) } else { bf16_to_f32(b) };
    let mut rng = Lcg(seed ^ 0xB4C4_3A2D);
    let mut gen = |n: usize| -> (Vec<u16>, Vec<f32>) {
        let bits: Vec<u16> = (0..n).map(|_| to_bits(rng.normal())).collect();
        let vals = bits.iter().map(|&b| from_bits(b)).collect();
        (bits, vals)
    };
    let (qb, qf) = gen(s.q_shape().iter().product());
    let (kb, kf) = gen(s.kv_shape().iter().product());
    let (vb, vf) = gen(s.kv_shape().iter().product());
    let (dob, dof) = gen(s.q_shape().iter().product());

    let host_mask = case_mask(case)?;
    let visible = |b: usize, h: usize, i: usize, j: usize| match (&case.mask, &host_mask) {
        (_, Some(m)) => m.get(b, h, i, j),
        (BackwardCaseMask::Window(w), None) => j < s.seqlen_k && w.is_visible(i, j),
        (BackwardCaseMask::Blocks { .. } | BackwardCaseMask::Documents { .. }, None) => false,
    };
    let scale = case
        .opts
        .scale
        .map_or(1.0 / (s.head_dim as f64).sqrt(), f64::from);
    let fwd = attention_reference(&s, &qf, &kf, &vf, scale, visible);
    let ob: Vec<u16> = fwd.o.iter().map(|&x| to_bits(x as f32)).collect();
    let lse: Vec<f32> = fwd.lse.iter().map(|&x| x as f32).collect();
    let of: Vec<f32> = ob.iter().map(|&b| from_bits(b)).collect();
    let _ = of;
    let reference = attention_backward_reference(&s, &qf, &kf, &vf, &dof, scale, visible);

    let q = runner.upload_bf16(&qb, s.q_shape())?;
    let k = runner.upload_bf16(&kb, s.kv_shape())?;
    let v = runner.upload_bf16(&vb, s.kv_shape())?;
    let o = runner.upload_bf16(&ob, s.q_shape())?;
    let d_o = runner.upload_bf16(&dob, s.q_shape())?;
    let stream = runner.stream();
    let lse_dev = stream.clone_htod(&lse).map_err(driver("uploading lse"))?;
    let device_mask = host_mask
        .as_ref()
        .map(|m| runner.upload_block_mask(m))
        .transpose()?;
    let mask = match &device_mask {
        Some(m) => Mask::Blocks(m),
        None => match &case.mask {
            BackwardCaseMask::Window(w) => Mask::Window(*w),
            BackwardCaseMask::Blocks { .. } | BackwardCaseMask::Documents { .. } => Mask::none(),
        },
    };
    // A mask left on the GPU: its geometry on the host, the count on the device.
    let on_device = match (&host_mask, case.lists_on_device) {
        (Some(m), true) => {
            let (mut geometry, count) = super::selftest::left_on_device(stream, m, &case.name)?;
            let backward = *m.transposed().map_err(AttentionError::Masks)?.accumulator();
            geometry
                .add_transposed(&backward, &PackOptions::default())
                .map_err(AttentionError::Masks)?;
            Some((geometry, count))
        }
        _ => None,
    };
    let mut entries = ListEntries::Read;
    let mut ws = BackwardWorkspace::new(stream, &s)?;
    let mut grads = runner.alloc_gradients(&s)?;
    let mut first: Option<[Vec<u16>; 3]> = None;
    let mut nondeterministic_runs = 0;
    let mut documents_grid = false;
    // The step the kernel ran at: a case that names a step fails if another one ran.
    let mut step_m = None;
    for _ in 0..case.runs.max(1) {
        for t in [&mut grads.dq, &mut grads.dk, &mut grads.dv] {
            stream
                .memcpy_htod(&vec![0xFFFFu16; t.data.len()], &mut t.data)
                .map_err(driver("poisoning gradients"))?;
        }
        if let (Some((geometry, count)), Some(m)) = (&on_device, &device_mask) {
            let raw = |t: &fragmask_host::attention::DeviceTensor<u16>| {
                RawTensor::contiguous(t.data.device_ptr(stream).0, t.shape)
            };
            let transposed = m
                .device_transposed_lists(stream)
                .ok_or_else(|| AttentionError::Mask("no transposed lists uploaded".into()))?
                .with_partial_count(count.device_ptr(stream).0);
            let raw_mask = RawBackwardMask::Blocks(geometry, m.device_lists(stream), transposed);
            let plan = runner.plan_backward(
                &raw(&q),
                &raw(&k),
                &raw(&v),
                &raw(&o),
                &raw(&d_o),
                &raw_mask,
                &case.opts,
                &ws,
            )?;
            entries = plan.list_entries();
            let ptrs = BackwardPointers {
                q: raw(&q).ptr,
                k: raw(&k).ptr,
                v: raw(&v).ptr,
                o: raw(&o).ptr,
                d_o: raw(&d_o).ptr,
                lse: lse_dev.device_ptr(stream).0,
                grads: RawGradients {
                    dq: grads.dq.data.device_ptr(stream).0,
                    dk: grads.dk.data.device_ptr(stream).0,
                    dv: grads.dv.data.device_ptr(stream).0,
                },
            };
            // SAFETY: every buffer is a live allocation of this runner's context sized for
            // `s` (the plan's shapes, contiguous), the count and the mask's lists too, alive
            // until the synchronize below; `ws` is this call's alone.
            unsafe { plan.run(stream, &ptrs, &ws) }?;
        } else if fp16 && case.opts.paired_keys != Some(true) {
            // fp16 and the raw-pointer path (paired key blocks need a prepared call, which
            // uploads their table).
            let raw = |t: &fragmask_host::attention::DeviceTensor<u16>| {
                RawTensor::contiguous(t.data.device_ptr(stream).0, t.shape)
            };
            let raw_mask = match (&mask, &device_mask) {
                (_, Some(m)) => RawBackwardMask::Blocks(
                    &m.host,
                    m.device_lists(stream),
                    m.device_transposed_lists(stream).ok_or_else(|| {
                        AttentionError::Mask("no transposed lists uploaded".into())
                    })?,
                ),
                (Mask::Window(w), None) => RawBackwardMask::Window(*w),
                (Mask::Blocks(_), None) => RawBackwardMask::Window(Window::NONE),
            };
            let out = RawGradients {
                dq: grads.dq.data.device_ptr(stream).0,
                dk: grads.dk.data.device_ptr(stream).0,
                dv: grads.dv.data.device_ptr(stream).0,
            };
            let lse_ptr = lse_dev.device_ptr(stream).0;
            // The raw launch's kernel, as it chooses it (window or the mask's tile).
            step_m = Some(
                fragmask_host::attention::choice::backward_kernel(
                    s.head_dim,
                    device_mask.as_ref().map(|m| &m.host),
                    &case.opts,
                )?
                .step_m(),
            );
            // SAFETY: every buffer is a live allocation of this runner's context sized for
            // `s`, alive until the synchronize below.
            unsafe {
                runner.launch_backward_raw(
                    stream,
                    &raw(&q),
                    &raw(&k),
                    &raw(&v),
                    &raw(&o),
                    lse_ptr,
                    &raw(&d_o),
                    &raw_mask,
                    &case.opts,
                    out,
                    &mut ws,
                )?;
            }
        } else {
            let prepared = runner.prepare_backward(
                &q, &k, &v, &o, &lse_dev, &d_o, &mask, &case.opts, &mut ws, &mut grads,
            )?;
            documents_grid = prepared.kernel().mask() == BackwardMask::Documents;
            step_m = Some(prepared.kernel().step_m());
            prepared.launch()?;
        }
        stream
            .synchronize()
            .map_err(driver("running the backward kernels"))?;
        let got = [
            stream
                .clone_dtoh(&grads.dq.data)
                .map_err(driver("reading dQ"))?,
            stream
                .clone_dtoh(&grads.dk.data)
                .map_err(driver("reading dK"))?,
            stream
                .clone_dtoh(&grads.dv.data)
                .map_err(driver("reading dV"))?,
        ];
        match &first {
            None => first = Some(got),
            Some(f) => {
                if *f != got {
                    nondeterministic_runs += 1;
                }
            }
        }
    }
    let got = first.ok_or_else(|| AttentionError::Shape("no run".into()))?;
    // Gradients in the case's strides, gathered back into [B, H, S, D] order.
    let got = match case.opts.grad_strides {
        None => got,
        Some(g) => {
            let [dq, dk, dv] = got;
            let gather = |bits: Vec<u16>, extents: [usize; 4], st: [usize; 3]| {
                strides::gather_contiguous(&bits, extents, st).ok_or_else(|| {
                    AttentionError::Shape(format!(
                        "{}: gradient strides {st:?} reach past the buffer",
                        case.name
                    ))
                })
            };
            [
                gather(dq, s.q_shape(), g.dq)?,
                gather(dk, s.kv_shape(), g.dkv)?,
                gather(dv, s.kv_shape(), g.dkv)?,
            ]
        }
    };
    let mut bad = 0usize;
    let mut rel_err = [0.0f64; 3];
    for (e, (bits, want)) in
        rel_err.iter_mut().zip(
            got.iter()
                .zip([&reference.dq, &reference.dk, &reference.dv]),
        )
    {
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        for (&b, &r) in bits.iter().zip(want.iter()) {
            let x = f64::from(from_bits(b));
            if !x.is_finite() {
                bad += 1;
                continue;
            }
            diff += (x - r) * (x - r);
            norm += r * r;
        }
        *e = if norm > 0.0 {
            (diff / norm).sqrt()
        } else {
            diff.sqrt()
        };
    }
    let d = s.head_dim;
    let mut empty_row_errors = 0;
    for (row, &l) in fwd.lse.iter().enumerate() {
        if l == f64::NEG_INFINITY {
            empty_row_errors += got[0][row * d..(row + 1) * d]
                .iter()
                .filter(|&&b| b != 0 && b != 0x8000)
                .count();
        }
    }
    // A documents case names the mode it tests: one that fell back to the lists where the
    // grid applies fails.
    let want_grid = matches!(case.mask, BackwardCaseMask::Documents { .. })
        && !fp16
        && !case.opts.deterministic;
    let passed = bad == 0
        && documents_grid == want_grid
        && case.opts.step_m.is_none_or(|want| step_m == Some(want))
        && empty_row_errors == 0
        && nondeterministic_runs == 0
        && (!case.lists_on_device
            || (entries == ListEntries::DenseAtRunTime) == case.opts.deterministic)
        && rel_err.iter().all(|&e| e < GRAD_TOLERANCE);
    Ok(BackwardCaseResult {
        name: case.name.clone(),
        rel_err,
        bad_values: bad,
        empty_row_errors,
        nondeterministic_runs,
        documents_grid,
        passed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fragmask_host::attention::choice::backward_kernel;

    /// What a case needs before a GPU: its mask packs (and decodes to its predicate), the
    /// runtime builds a backward configuration for it, with the strided-gradient variant
    /// where the case names strides, and the kernel source generates; named uniquely, so
    /// `--cases` can select each.
    #[test]
    fn every_case_packs_its_mask_and_has_a_backward_configuration_with_source() {
        let cases = default_cases();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "two backward selftest cases share a name");
        for case in &cases {
            let mask = case_mask(case).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let k = backward_kernel(case.shape.head_dim, mask.as_ref(), &case.opts)
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let k = match case.opts.grad_strides {
                Some(g) => {
                    strides::check_output_strides("dq", case.shape.q_shape(), g.dq)
                        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                    strides::check_output_strides("dk and dv", case.shape.kv_shape(), g.dkv)
                        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
                    k.with_strided_grads(true)
                }
                None => k,
            };
            k.source()
                .unwrap_or_else(|e| panic!("{}: {}: {e}", case.name, k.label()));
        }
    }
}
