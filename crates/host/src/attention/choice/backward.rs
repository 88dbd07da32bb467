//! The backward's kernel choice: the step, the documents grid, paired key blocks, GQA group
//! slices, launch sections and the dQ writer warp of a call (the forward's is the parent
//! module's; both are asked by the runtime's plan and launch paths).

use fragmask_kernels::attention::backward::{
    BackwardKernel, BackwardMask, DqReduce, STEP_M, WIDE_STEP_M,
};
use fragmask_kernels::attention::{ActDtype, ConfigError, ListEntries};
use fragmask_masks::{PackedMask, TransposedLists};

use super::super::backward::{transposed_lists, BackwardOptions};
use super::super::persistent::TileSteps;
use super::super::{blockmask, AttentionError, AttentionShape, Window};
use super::{SECTION_L2_BYTES, SECTION_MAX_ESTIMATED_TILES, SECTION_MIN_GAIN};

/// The steps of each key tile of the backward's window walk on the whole sequence (the
/// kernel's `fm_make_schedule`: the `step_m`-query steps between the first and the last
/// query that sees one of the tile's keys), per key tile in grid order, over the `group`
/// query heads a CTA walks.
pub fn backward_window_steps(
    params: &fragmask_kernels::attention::backward::BackwardParams,
    cta_n: u32,
    step_m: u32,
    group: u32,
) -> Vec<u32> {
    let sk = i64::from(params.seqlen_k);
    let (cta_n, step) = (i64::from(cta_n.max(1)), i64::from(step_m.max(1)));
    (0..((sk + cta_n - 1) / cta_n).max(0))
        .map(|n| {
            let steps = window_walk_queries(params, cta_n, n)
                .map_or(0, |(lo, hi)| hi / step - lo / step + 1);
            u32::try_from(steps.saturating_mul(i64::from(group))).unwrap_or(u32::MAX)
        })
        .collect()
}

/// The first and last query that see one of key tile `n`'s `cta_n` keys in the window walk
/// on the whole sequence (the kernel's `fm_make_schedule`: `lo` and `hi`); `None` where no
/// query does.
pub(super) fn window_walk_queries(
    params: &fragmask_kernels::attention::backward::BackwardParams,
    cta_n: i64,
    n: i64,
) -> Option<(i64, i64)> {
    use fragmask_kernels::attention::WINDOW_INFINITE;
    let (sq, sk) = (i64::from(params.seqlen_q), i64::from(params.seqlen_k));
    let diag = i64::from(params.diag_offset);
    let n0 = n * cta_n;
    let n_end = (n0 + cta_n).min(sk) - 1;
    let lo = if params.window_right >= WINDOW_INFINITE {
        0
    } else {
        (n0 - diag - i64::from(params.window_right)).max(0)
    };
    let hi = if params.window_left >= WINDOW_INFINITE {
        sq - 1
    } else {
        (sq - 1).min(n_end - diag + i64::from(params.window_left))
    };
    (lo <= hi).then_some((lo, hi))
}

/// The (KV head, batch) planes per section of the backward's launch order
/// (`BackwardParams::head_section`, `key_tile::SECTION_ORDER`) on `slots` SMs: in the
/// deterministic mode [`deterministic_head_section`]; for a causal walk of the window mode
/// on the whole sequence, with one CTA per key tile, FlashAttention-4's L2 section (the largest power of two
/// of planes whose query head's Q, dO and f32 dQ rows fit in [`SECTION_L2_BYTES`]; a CTA
/// walks its group's query heads one after another) where the
/// list-scheduling estimate ([`super::super::persistent::makespan`]) ends the launch at least
/// [`SECTION_MIN_GAIN`] earlier than the grid's order (which starts each plane's longest
/// key tiles after the previous plane's shortest: causal S = 4096 and 8192 at H = 16);
/// else 1.
pub fn backward_head_section(
    shape: &AttentionShape,
    kernel: &BackwardKernel,
    params: &fragmask_kernels::attention::backward::BackwardParams,
    slots: usize,
) -> u32 {
    use fragmask_kernels::attention::WINDOW_INFINITE;
    if kernel.deterministic() {
        return deterministic_head_section(shape, kernel, false);
    }
    let causal_walk =
        params.window_left >= WINDOW_INFINITE && params.window_right < WINDOW_INFINITE;
    if kernel.mask() != BackwardMask::Window
        || kernel.grid_split() != 1
        || !causal_walk
        || shape.kv_heads == 0
        || shape.heads % shape.kv_heads != 0
    {
        return 1;
    }
    // Group slices (BackwardKernel::with_group_slices): each CTA walks `group / slices`
    // query heads, and x runs the slices' key tiles one slice after the other.
    let slices = kernel.group_slices().max(1);
    let group = (shape.heads / shape.kv_heads) as u64 / u64::from(slices);
    let element = kernel.dtype().size() as u64;
    let d = shape.head_dim as u64;
    // The rows a plane's CTAs read at a time: Q and dO (element) and the f32 dQ accumulator
    // of one query head (a CTA walks its group's heads one after another).
    let plane_bytes = (shape.seqlen_q as u64)
        .saturating_mul(2 * d * element + 4 * d)
        .max(1);
    let planes = shape.kv_heads.saturating_mul(shape.batch);
    let fit = (SECTION_L2_BYTES / plane_bytes).max(1);
    let section = (1u64 << fit.ilog2()).min(planes as u64) as usize;
    if section <= 1 {
        return 1;
    }
    let tile_steps = backward_window_steps(params, kernel.cta_n(), kernel.step_m(), group as u32);
    let steps = TileSteps::PerRowBlock {
        steps: tile_steps.repeat(slices as usize),
        planes,
    };
    if steps.len() <= slots || steps.len() > SECTION_MAX_ESTIMATED_TILES {
        return 1;
    }
    let plain = super::super::persistent::makespan(&steps, slots, 1) as f64;
    let sections = super::super::persistent::makespan(&steps, slots, section) as f64;
    if sections < plain * (1.0 - SECTION_MIN_GAIN) {
        u32::try_from(section).unwrap_or(1)
    } else {
        1
    }
}

/// The (KV head, batch) planes per section of the deterministic mode's launch order
/// (`key_tile::SECTION_ORDER`): up to [`DETERMINISTIC_SECTION_PLANES`], planes fastest
/// inside a section, for tile lists that are not dense; 1 (the grid's order) elsewhere.
/// A key tile of the lists waits for the ones of its plane before it that visit the same
/// query steps. Launched one plane after another, a plane's key tiles all start together and
/// queue on each other's turns; interleaved, they start spread over the launch, after the
/// tiles they wait for. Each plane keeps its own order, so no CTA waits for one launched
/// after it. One H200, D = 128 (`bench/results/session-2026-11-29i/`), against the grid's
/// order, S = 16384, H = 16: block-sparse 10% 0.878 / 0.790 / 0.750 / 0.743 with 2 / 4 / 8 /
/// 16 planes per section, block-sparse 50% 0.862 / 0.867 / 0.919 with 4 / 8 / 16 (more
/// planes' rows in L2 at once); B = 4, H = 32, S = 4096, block-sparse 10%: 0.831 / 0.801 /
/// 0.819 with 8 / 16 / 32. The window walk keeps the grid's order: its deterministic order
/// launches a plane's shortest walks first, so interleaved it ran its longest walks last
/// (causal 1.57, GQA 32:8 causal 1.40 with 16 planes; no mask 1.04); so do dense lists,
/// whose key tiles all visit every step (random 50%: 1.15).
/// Lists built on the GPU are found dense or not when the kernel runs, which then keeps
/// the grid's order for dense ones. With `walk_orders` (the host's lists walked by
/// `fragmask_masks::deterministic_walks`), whose key tiles wait less for their turns, a
/// section holds at most [`DETERMINISTIC_SECTION_QUERIES`] query rows over its planes, so
/// that their Q, dO and dQ rows share L2 (2 planes at S = 16384).
pub fn deterministic_head_section(
    shape: &AttentionShape,
    kernel: &BackwardKernel,
    walk_orders: bool,
) -> u32 {
    let sparse_lists = matches!(kernel.mask(), BackwardMask::Blocks { .. })
        && !kernel.paired_keys()
        && kernel.list_entries() != ListEntries::Dense;
    if !kernel.deterministic() || !sparse_lists {
        return 1;
    }
    let planes = shape.kv_heads.saturating_mul(shape.batch).max(1);
    let by_rows = match walk_orders {
        true => (DETERMINISTIC_SECTION_QUERIES / shape.seqlen_q.max(1)).max(1),
        false => planes,
    };
    u32::try_from(planes.min(by_rows))
        .unwrap_or(u32::MAX)
        .min(DETERMINISTIC_SECTION_PLANES)
}

/// The most planes per section of the deterministic mode's launch order
/// ([`deterministic_head_section`]): 8, whose mean over the three masks measured there is
/// the lower (0.816 of the grid's time, against 0.821 with 16).
pub const DETERMINISTIC_SECTION_PLANES: u32 = 8;

/// The most query rows a section of the deterministic lists' launch order holds over its
/// planes where the host's walk orders run ([`deterministic_head_section`]). With them and
/// the dQ writer warp taking the turns (one H200, D = 128, 3 interleaved rounds,
/// `bench/results/session-2026-11-29k/call5/`, `call6/`), block-sparse 10% / 50%, time with
/// this many rows over twice as many: S = 16384 (2 planes over 4) 0.973 / 0.987,
/// S = 8192 (4 over 8) 0.941 / 0.995; half as many again is slower (S = 16384, 1 plane
/// over 2: 1.068 / 1.069; S = 8192 2 over 4: 1.040 / 1.074; S = 4096 4 over 8: 1.006).
/// The 64-token tile's one-warpgroup kernels agree (write-up 002, N = 23296, H = 12,
/// 1 plane over 2: 0.962 / 0.991, `call4/`). Without the walk orders, with the writer,
/// 4 / 2 / 16 planes run 1.049 / 1.130 / 1.006 of 8 at block-sparse 10%, S = 16384
/// (0.998 / 1.012 / 1.043 at 50%; `session-2026-11-29l/call4/`), so lists built on the
/// GPU keep 8.
pub const DETERMINISTIC_SECTION_QUERIES: usize = 32_768;

/// Whether the backward runs the documents grid where it applies (see
/// [`backward_documents`]) when the call's options do not say.
pub const BACKWARD_DOCUMENTS_GRID: bool = true;

/// The documents the backward's documents grid ([`BackwardMask::Documents`]) runs for a
/// call with packed mask `mask`: its documents when it has them, `Sq == Sk` equals their
/// length, the call is not deterministic (a query step straddling two documents is
/// visited by the key tiles of both, in no fixed order) and `opts.documents_grid`
/// (default [`BACKWARD_DOCUMENTS_GRID`]) allows it; otherwise `None` (the tile lists).
pub fn backward_documents<'a>(
    shape: &AttentionShape,
    mask: &'a PackedMask,
    opts: &BackwardOptions,
) -> Option<&'a fragmask_masks::Documents> {
    let enabled = opts.documents_grid.unwrap_or(BACKWARD_DOCUMENTS_GRID);
    mask.documents().filter(|d| {
        enabled
            && !opts.deterministic
            && shape.seqlen_q == shape.seqlen_k
            && shape.seqlen_q == d.seqlen()
    })
}

/// Whether a backward over `mask` runs with dense tile lists
/// (`BackwardKernel::with_dense_lists`): both its forward lists (the deterministic rank's)
/// and its transposed lists hold every tile as partial, in order
/// (`fragmask_masks::BlockLists::dense_partial`; docs/masks.md, "Dense tile lists").
pub fn backward_dense_lists(mask: &PackedMask) -> bool {
    mask.lists().dense_partial() && mask.transposed().is_ok_and(|t| t.lists().dense_partial())
}

/// How a backward over `mask` gets its lists' entries (`BackwardKernel::with_list_entries`),
/// where its kernel takes dense lists (a block mask, unpaired, not the documents grid):
/// computed where the host's lists are dense ([`backward_dense_lists`]); in the
/// deterministic mode, computed where the count says so at run time for transposed lists
/// built on the GPU that come with their partial-tile count (`partial_count`,
/// `RawMaskLists::partial_count`, nonzero: a count of every tile makes both directions
/// dense); read otherwise. The run-time check pays only in the deterministic mode, whose
/// rank it computes instead of counting the forward row every step: on one H200 (the Python
/// op, S=16384, H=16, D=128) random 50% deterministic took 11.6 against 14.9 ms
/// (`bench/results/session-2026-11-29g/call9/`), block-sparse 10% 0.998 of the read-back
/// mask's time; without determinism random 50% 0.986 and top-k S/8 1.020 (`call4/`: the
/// entries' branch costs 14 instructions per step).
pub fn backward_list_entries(
    mask: &PackedMask,
    partial_count: u64,
    deterministic: bool,
) -> ListEntries {
    if backward_dense_lists(mask) {
        ListEntries::Dense
    } else if partial_count != 0 && deterministic {
        ListEntries::DenseAtRunTime
    } else {
        ListEntries::Read
    }
}

/// Whether a call on a 64x64 mask's tile pairs its key blocks by default
/// (`BackwardKernel::with_paired_keys`, docs/backward.md "Paired key blocks").
pub const BACKWARD_PAIRED_KEYS: bool = true;

/// Whether a call runs paired key blocks: the options' choice or
/// [`BACKWARD_PAIRED_KEYS`], where the kernel takes them and every query head of a CTA
/// walks one mask plane (no GQA group over a per-head mask). `Some(true)` where they do
/// not run is an error.
pub fn backward_paired_keys(
    shape: &AttentionShape,
    mask: &PackedMask,
    kernel: &BackwardKernel,
    opts: &BackwardOptions,
) -> Result<bool, AttentionError> {
    let fits = kernel.with_paired_keys(true).is_ok()
        && (shape.heads == shape.kv_heads || mask.shape().heads == 1);
    match opts.paired_keys {
        Some(true) if !fits => Err(AttentionError::Config(ConfigError::Layout(format!(
            "paired key blocks take a 64x64 mask's tile at head dim 64 or 128, without GQA \
             over a per-head mask: not {}",
            kernel.label()
        )))),
        Some(on) => Ok(on && fits),
        None => Ok(BACKWARD_PAIRED_KEYS && fits),
    }
}

/// The backward configuration of a call: the mask's tile (with its transposed lists, in
/// the default backward accumulator) or the window mode, at `head_dim`, with `opts`.
pub fn backward_kernel(
    head_dim: usize,
    mask: Option<&PackedMask>,
    opts: &BackwardOptions,
) -> Result<BackwardKernel, AttentionError> {
    let d = u32::try_from(head_dim).unwrap_or(0);
    let mode = match mask {
        None => BackwardMask::Window,
        Some(m) => {
            blockmask::mask_geometry(m)?;
            let t = transposed_lists(m)?;
            let acc = m.accumulator();
            let want = TransposedLists::default_accumulator(acc).map_err(AttentionError::Masks)?;
            if *t.accumulator() != want {
                return Err(AttentionError::MaskLayout {
                    field: "transposed accumulator",
                    found: format!(
                        "{} warpgroup(s), swap_ab {}",
                        t.accumulator().warpgroups(),
                        t.accumulator().swap_ab()
                    ),
                    expected: format!("{} warpgroup(s), swap_ab true", want.warpgroups()),
                });
            }
            BackwardMask::Blocks {
                block_m: acc.block_m(),
                block_n: acc.block_n(),
            }
        }
    };
    backward_config(d, mode, opts)
}

/// Queries per backward step where the call does not name one (its dQ reduction: fragment-order
/// atomics, [`backward_config`]): [`WIDE_STEP_M`] for head dim
/// 64's window walk (no mask, causal, sliding windows), documents grid and 128x128 mask
/// tiles outside the deterministic mode, [`STEP_M`] elsewhere (64-key mask tiles run one
/// warpgroup). The wide step against the 64-query step with K and V in registers
/// (one H100, 4 interleaved rounds, S = 16384, H = 16): no mask 0.950, causal 0.960,
/// S = 8192 no mask 0.949, S = 4096 causal 0.972, window 1024 0.976 (docs/backward.md).
pub fn backward_step_m(d: u32, mode: BackwardMask, deterministic: bool) -> u32 {
    // Where the wide step runs is the kernels crate's rule (`BackwardKernel::check_step`);
    // the choice is to take it wherever it does.
    let wide = BackwardKernel::default_for(d, mode)
        .and_then(|k| k.with_kv_registers(false))
        .map(|k| k.with_deterministic(deterministic))
        .and_then(|k| k.with_step_m(WIDE_STEP_M));
    if wide.is_ok() {
        WIDE_STEP_M
    } else {
        STEP_M
    }
}

/// Whether the backward reads a mask packed at `block_m x block_n` at `head_dim` with the
/// default options (a call's own options are checked with its mask by [`backward_kernel`]):
/// what the CLI asks of a mask it builds at `--block`, and Python of a call that will need a
/// backward, before its forward. 192x128 and 128x80, the forward's tiles at head dims 64
/// and 256, are refused (`ConfigError::BackwardMaskTile`).
pub fn check_backward_mask_tile(
    head_dim: u32,
    block_m: u32,
    block_n: u32,
) -> Result<(), AttentionError> {
    let mode = BackwardMask::Blocks { block_m, block_n };
    backward_config(head_dim, mode, &BackwardOptions::default()).map(|_| ())
}

/// The backward configuration of `mode` (window, or a mask tile) at head dim `d` with
/// `opts`: the kernels crate's default for the mode, then the options' dQ reduction, step
/// ([`backward_step_m`] unless named), stages (default: the mode's default, or fewer where
/// the chosen reduction leaves room
/// for fewer), dtype and determinism; the whole shared memory is checked here, before any
/// GPU. [`backward_kernel`] checks a call's mask first; `warm_up_backward` compiles the
/// configurations of the modes it is given.
pub fn backward_config(
    d: u32,
    mode: BackwardMask,
    opts: &BackwardOptions,
) -> Result<BackwardKernel, AttentionError> {
    let mut k = BackwardKernel::default_for(d, mode).map_err(AttentionError::Config)?;
    let step_m = opts
        .step_m
        .unwrap_or_else(|| backward_step_m(d, mode, opts.deterministic));
    if step_m != k.step_m() {
        // The wide step holds K and V in shared memory (BackwardKernel::with_step_m) and
        // adds dQ by fragment-order atomics unless the call names a reduction: against the
        // bulk reductions on one H100 (3 rounds), S = 16384 no mask 0.990, causal 0.978,
        // S = 8192 0.964 (a third stage: 1.004, 1.002, 0.975).
        k = k
            .with_kv_registers(false)
            .and_then(|k| k.with_step_m(step_m))
            .map(|k| k.with_dq_reduce(DqReduce::FragmentAtomics))
            .map_err(AttentionError::Config)?;
    }
    if let Some(reduce) = opts.dq_reduce {
        k = k.with_dq_reduce(reduce);
    }
    match opts.stages {
        Some(stages) => k.with_stages(stages),
        None => k.with_fitting_stages(),
    }
    .and_then(|k| k.with_dtype(opts.dtype.unwrap_or(ActDtype::Bf16)))
    .map(|k| k.with_deterministic(opts.deterministic))
    .and_then(|k| k.check_step().map(|()| k))
    .and_then(|k| {
        let writer = opts
            .dq_writer
            .unwrap_or(BACKWARD_DQ_WRITER && k.dq_writer_fits());
        k.with_dq_writer(writer)
    })
    .and_then(|k| match opts.group_slices {
        Some(n) => k.with_group_slices(n),
        None => Ok(k),
    })
    .map_err(AttentionError::Config)
    .and_then(|k| check_backward_head_section(&k, opts.head_section).map(|()| k))
}

/// Refuses `slices` GQA group slices (`BackwardOptions::group_slices`) that do not divide
/// the query heads per KV head of `shape` (the kernel's own rule is
/// `BackwardKernel::check_group_slices`).
pub fn check_group_slices(shape: &AttentionShape, slices: u32) -> Result<(), AttentionError> {
    let group = shape.heads / shape.kv_heads.max(1);
    if slices == 0 || group % slices as usize != 0 {
        return Err(AttentionError::Shape(format!(
            "{slices} GQA group slices do not divide the group of {group} query heads per KV head"
        )));
    }
    Ok(())
}

/// Refuses a named launch-order section (`BackwardOptions::head_section`) of 0, and one
/// above 1 where the grid's order stays: the documents grid, paired key blocks, and outside
/// the deterministic mode the tile lists (their own dispatch order) and column-split CTAs.
fn check_backward_head_section(
    k: &BackwardKernel,
    section: Option<u32>,
) -> Result<(), AttentionError> {
    let takes_sections = match k.mask() {
        BackwardMask::Window => k.deterministic() || k.grid_split() == 1,
        BackwardMask::Blocks { .. } => k.deterministic() && !k.paired_keys(),
        BackwardMask::Documents => false,
    };
    match section {
        Some(0) => Err(AttentionError::Shape(
            "the backward's head section must be at least 1".into(),
        )),
        Some(n) if n > 1 && !takes_sections => Err(AttentionError::Shape(format!(
            "a backward head section of {n} takes the window walk (no mask, causal, windows; \
             one CTA per key tile outside the deterministic mode) or, in the deterministic \
             mode, the tile lists: not {}",
            k.label()
        ))),
        _ => Ok(()),
    }
}

/// The GQA group slices of the backward's window walk (`BackwardKernel::with_group_slices`)
/// for a call without `BackwardOptions::group_slices`: under a causal mask, two query heads
/// per CTA for groups of 4 or more (a power of two the kernel takes); 1 elsewhere. A CTA
/// that walks its whole group runs walks of a different length per key tile, so the CTAs
/// of a KV head drift onto different query heads and their rows leave L2 (GQA 64:8
/// causal, S = 16384, one H100: L2 hit rate 79% against 97% for 16 heads;
/// `session-2026-11-27r/gqa-diag/`). One H200, S = 16384 causal, against one slice, two
/// runs of two rounds each (`session-2026-11-27r/gs-atomics/`): 64:8 two heads per CTA
/// 0.902-0.907, one 0.911-0.912, four 0.915-0.917; 32:8 at batch 2 two heads
/// 0.978-0.980, one 0.990-0.995. The caller checks that
/// the workspace holds the accumulators.
pub fn backward_group_slices(shape: &AttentionShape, kernel: &BackwardKernel, w: &Window) -> u32 {
    /// Query heads each CTA walks.
    const HEADS_PER_CTA: u32 = 2;
    let causal_walk = w.left.is_none() && w.right.is_some();
    let group = (shape.heads / shape.kv_heads.max(1)) as u32;
    if !causal_walk || group < 2 * HEADS_PER_CTA || !group.is_power_of_two() {
        return 1;
    }
    let slices = group / HEADS_PER_CTA;
    match kernel.with_group_slices(slices) {
        Ok(_) => slices,
        Err(_) => 1,
    }
}

/// Whether the backward's bulk dQ reductions go through the writer warp
/// (`BackwardKernel::with_dq_writer`) wherever the configuration takes it, when the call
/// does not say (`BackwardOptions::dq_writer`). Interleaved against the consumers issuing
/// them (one H200, 3 ABBA pairs, S = 16384, H = 16, head dim 128): no mask 0.979, causal
/// 1.004 (0.975-1.023), window 1024 0.975, 12 documents 0.950, random 50% 0.974, GQA 32:8
/// causal 0.974, S = 8192 0.981; unchanged kernels 0.996 and 0.999 (docs/backward.md).
pub const BACKWARD_DQ_WRITER: bool = true;

#[cfg(test)]
mod tests {
    use fragmask_kernels::attention::backward::BackwardParams;
    use fragmask_kernels::attention::{Geometry, WINDOW_INFINITE};
    use fragmask_masks::DenseMask;

    use super::*;
    use crate::attention::blockmask::pack_for_kernel;

    /// Calls `f` with every head dim, mode and determinism the backward takes (the
    /// documents grid is never deterministic), the default options of each.
    fn each_backward_call(mut f: impl FnMut(u32, BackwardMask, BackwardOptions)) {
        for d in [64, 128, 256] {
            for mode in BackwardMask::ALL {
                for deterministic in [false, true] {
                    if deterministic && mode == BackwardMask::Documents {
                        continue;
                    }
                    let opts = BackwardOptions {
                        deterministic,
                        ..BackwardOptions::default()
                    };
                    f(d, mode, opts);
                }
            }
        }
    }

    #[test]
    fn the_wide_backward_step_is_chosen_exactly_for_head_dim_64_and_128_query_modes() {
        each_backward_call(|d, mode, opts| {
            let deterministic = opts.deterministic;
            let k = backward_config(d, mode, &opts).unwrap();
            let wide = d == 64
                && mode
                    != (BackwardMask::Blocks {
                        block_m: 64,
                        block_n: 64,
                    })
                && !deterministic;
            assert_eq!(k.step_m(), if wide { WIDE_STEP_M } else { STEP_M }, "{k:?}");
            assert!(!(wide && k.kv_registers()), "{k:?}");
            if wide {
                assert_eq!(k.dq_reduce(), DqReduce::FragmentAtomics, "{k:?}");
            }
            // Named: the 64-query step keeps the head dim's K/V registers; the wide
            // step is refused where it does not run, before any GPU.
            let narrow = BackwardOptions {
                step_m: Some(STEP_M),
                ..opts
            };
            let n = backward_config(d, mode, &narrow).unwrap();
            assert_eq!(n.step_m(), STEP_M);
            assert_eq!(n.kv_registers(), d == 64, "{n:?}");
            let named = BackwardOptions {
                step_m: Some(WIDE_STEP_M),
                ..opts
            };
            assert_eq!(
                backward_config(d, mode, &named).is_ok(),
                wide,
                "{d} {mode:?}"
            );
        });
    }

    fn bwd_window(sq: i32, sk: i32, left: i32, right: i32, diag: i32) -> BackwardParams {
        BackwardParams {
            seqlen_q: sq,
            seqlen_k: sk,
            window_left: left,
            window_right: right,
            diag_offset: diag,
            ..BackwardParams::default()
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::attention::proptest_ci::config(64))]
        /// Each key tile's step count is the number of 64-query steps holding a query that
        /// sees one of its keys (query i sees key j iff i + diag - left <= j <= i + diag +
        /// right and j < Sk), times the group: the kernel walks that interval of steps.
        #[test]
        fn backward_window_steps_count_the_steps_that_see_each_key_tile(
            sq in 1i32..700, sk in 1i32..700,
            left in proptest::prop_oneof![0i32..400, proptest::strategy::Just(WINDOW_INFINITE)],
            right in proptest::prop_oneof![0i32..400, proptest::strategy::Just(WINDOW_INFINITE)],
            diag in -300i32..300, group in 1u32..4,
        ) {
            let p = bwd_window(sq, sk, left, right, diag);
            let got = backward_window_steps(&p, 128, 64, group);
            proptest::prop_assert_eq!(got.len(), (sk as usize).div_ceil(128));
            for (n, &g) in got.iter().enumerate() {
                let keys = (n as i64 * 128)..((n as i64 + 1) * 128).min(sk as i64);
                let sees = |i: i64| keys.clone().any(|j| {
                    (left >= WINDOW_INFINITE || i + diag as i64 - left as i64 <= j)
                        && (right >= WINDOW_INFINITE || j <= i + diag as i64 + right as i64)
                });
                let rows: Vec<i64> = (0..sq as i64).filter(|&i| sees(i)).collect();
                let want = match (rows.first(), rows.last()) {
                    (Some(a), Some(b)) => (b / 64 - a / 64 + 1) as u32 * group,
                    _ => 0,
                };
                proptest::prop_assert_eq!(g, want, "key tile {}", n);
            }
        }
    }

    #[test]
    fn launch_sections_where_the_causal_walk_ends_earlier_and_in_the_deterministic_mode() {
        let k = backward_config(128, BackwardMask::Window, &BackwardOptions::default()).unwrap();
        let shape = |s: usize, heads, kv_heads| AttentionShape {
            batch: 1,
            heads,
            kv_heads,
            seqlen_q: s,
            seqlen_k: s,
            head_dim: 128,
        };
        let causal = |s| bwd_window(s, s, WINDOW_INFINITE, 0, 0);
        // Causal S = 4096 and 8192 at H = 16: a query head's rows, dO and dQ take 4 and
        // 8 MiB, so 8 and 4 planes per section; GQA 32:8 at S = 8192 as many (a CTA walks
        // its four query heads one after another).
        assert_eq!(
            backward_head_section(&shape(4096, 16, 16), &k, &causal(4096), 132),
            8
        );
        assert_eq!(
            backward_head_section(&shape(8192, 16, 16), &k, &causal(8192), 132),
            4
        );
        assert_eq!(
            backward_head_section(&shape(8192, 32, 8), &k, &causal(8192), 132),
            4
        );
        // S = 16384: the grid's order is within 2% of the sections' estimate.
        assert_eq!(
            backward_head_section(&shape(16384, 16, 16), &k, &causal(16384), 132),
            1
        );
        // No mask: every key tile walks as far, nothing to reorder.
        let none = bwd_window(8192, 8192, WINDOW_INFINITE, WINDOW_INFINITE, 0);
        assert_eq!(
            backward_head_section(&shape(8192, 16, 16), &k, &none, 132),
            1
        );
        // The deterministic mode keeps the window walk's grid order (its shortest walks
        // launch first) and interleaves the planes of tile lists that are not dense; it
        // takes a named section with either.
        let det = BackwardOptions {
            deterministic: true,
            ..BackwardOptions::default()
        };
        let kd = backward_config(128, BackwardMask::Window, &det).unwrap();
        assert_eq!(
            backward_head_section(&shape(8192, 16, 16), &kd, &causal(8192), 132),
            1
        );
        let named = |n, deterministic| BackwardOptions {
            head_section: Some(n),
            deterministic,
            ..BackwardOptions::default()
        };
        assert!(backward_config(128, BackwardMask::Window, &named(4, true)).is_ok());
        assert!(backward_config(128, BackwardMask::Window, &named(0, false)).is_err());
        assert!(backward_config(128, BackwardMask::Window, &named(4, false)).is_ok());
        let lists = BackwardMask::Blocks {
            block_m: 128,
            block_n: 128,
        };
        let kl = backward_config(128, lists, &det).unwrap();
        assert_eq!(
            deterministic_head_section(&shape(4096, 4, 4), &kl, false),
            4.min(DETERMINISTIC_SECTION_PLANES)
        );
        assert_eq!(
            deterministic_head_section(&shape(4096, 64, 64), &kl, false),
            DETERMINISTIC_SECTION_PLANES
        );
        // With the walk orders, at most 32768 query rows per section: 2 planes at
        // S = 16384, 4 at 8192, 8 at 4096, one at 32768 and beyond; without, 8 planes at
        // any length.
        let walked = |s| deterministic_head_section(&shape(s, 16, 16), &kl, true);
        assert_eq!(
            [
                walked(16384),
                walked(8192),
                walked(4096),
                walked(23296),
                walked(131072)
            ],
            [2, 4, 8, 1, 1]
        );
        assert_eq!(
            deterministic_head_section(&shape(16384, 16, 16), &kl, false),
            8
        );
        let dense = kl.with_list_entries(ListEntries::Dense).unwrap();
        assert_eq!(
            deterministic_head_section(&shape(4096, 4, 4), &dense, false),
            1
        );
        let at_run_time = kl.with_list_entries(ListEntries::DenseAtRunTime).unwrap();
        assert_eq!(
            deterministic_head_section(&shape(4096, 4, 4), &at_run_time, false),
            4.min(DETERMINISTIC_SECTION_PLANES)
        );
        assert!(backward_config(128, lists, &named(4, false)).is_err());
        assert!(backward_config(128, lists, &named(4, true)).is_ok());
        assert!(backward_config(128, lists, &named(1, false)).is_ok());
    }

    #[test]
    fn group_slices_default_to_two_heads_per_cta_under_a_causal_mask_only() {
        let k = backward_config(128, BackwardMask::Window, &BackwardOptions::default()).unwrap();
        let shape = |heads, kv_heads| AttentionShape {
            batch: 1,
            heads,
            kv_heads,
            seqlen_q: 4096,
            seqlen_k: 4096,
            head_dim: 128,
        };
        let causal = Window::causal();
        let none = Window::NONE;
        let sliding = Window {
            left: Some(1024),
            right: Some(0),
            diag_offset: 0,
        };
        assert_eq!(backward_group_slices(&shape(64, 8), &k, &causal), 4);
        assert_eq!(backward_group_slices(&shape(32, 8), &k, &causal), 2);
        assert_eq!(backward_group_slices(&shape(16, 4), &k, &causal), 2);
        for (heads, kv_heads) in [(16, 8), (16, 16), (12, 4), (24, 8)] {
            assert_eq!(
                backward_group_slices(&shape(heads, kv_heads), &k, &causal),
                1
            );
        }
        for w in [none, sliding] {
            assert_eq!(backward_group_slices(&shape(64, 8), &k, &w), 1);
        }
        let det = BackwardOptions {
            deterministic: true,
            ..BackwardOptions::default()
        };
        let kd = backward_config(128, BackwardMask::Window, &det).unwrap();
        assert_eq!(backward_group_slices(&shape(64, 8), &kd, &causal), 1);
        // A named count must divide the group; the kernel refuses the modes it does not run.
        assert!(check_group_slices(&shape(32, 8), 4).is_ok());
        assert!(check_group_slices(&shape(32, 8), 8).is_err());
        assert!(check_group_slices(&shape(32, 8), 0).is_err());
        let named = |n, deterministic| BackwardOptions {
            group_slices: Some(n),
            deterministic,
            ..BackwardOptions::default()
        };
        assert!(backward_config(128, BackwardMask::Window, &named(2, false)).is_ok());
        assert!(backward_config(128, BackwardMask::Window, &named(2, true)).is_err());
        let lists = BackwardMask::Blocks {
            block_m: 128,
            block_n: 128,
        };
        assert!(backward_config(128, lists, &named(2, false)).is_err());
        assert!(backward_config(128, lists, &named(1, false)).is_ok());
    }

    #[test]
    fn the_dq_writer_warp_is_taken_by_default_exactly_where_it_fits_and_refused_elsewhere() {
        each_backward_call(|d, mode, opts| {
            let k = backward_config(d, mode, &opts).unwrap();
            let fits = k.dq_writer_fits();
            assert_eq!(k.dq_writer(), BACKWARD_DQ_WRITER && fits, "{k:?}");
            let on = BackwardOptions {
                dq_writer: Some(true),
                ..opts
            };
            assert_eq!(backward_config(d, mode, &on).is_ok(), fits, "{k:?}");
            let off = BackwardOptions {
                dq_writer: Some(false),
                ..opts
            };
            assert!(!backward_config(d, mode, &off).unwrap().dq_writer());
        });
        // Head dim 128 on two warpgroups takes it, in the deterministic mode too (where the
        // writer takes the dQ turns).
        let modes = BackwardMask::ALL;
        let k = backward_config(128, modes[0], &BackwardOptions::default()).unwrap();
        assert!(k.dq_writer_fits());
        let det = BackwardOptions {
            deterministic: true,
            ..BackwardOptions::default()
        };
        assert!(backward_config(128, modes[0], &det).unwrap().dq_writer());
    }
    #[test]
    fn backward_dense_lists_only_where_both_directions_list_every_tile_as_partial() {
        let mut bytes: Vec<u8> = (0..256 * 384)
            .map(|i| ((i * 7919) % 3 == 0) as u8)
            .collect();
        let pack = |bytes: &[u8]| {
            let mut m = pack_for_kernel(
                &DenseMask::new(bytes, &[256, 384]).unwrap(),
                &Geometry::TILE_128X128,
            )
            .unwrap();
            let backward = TransposedLists::default_accumulator(m.accumulator()).unwrap();
            m.add_transposed(&backward, &fragmask_masks::PackOptions::default())
                .unwrap();
            m
        };
        let m = pack(&bytes);
        assert!(m.transposed().is_ok());
        assert!(backward_dense_lists(&m));
        // Without its transposed lists (a mask packed on the GPU): not dense.
        let mut bare = m.clone();
        bare.drop_transposed();
        assert!(!backward_dense_lists(&bare));
        // One empty tile: neither direction is dense.
        for q in 128..256 {
            bytes[q * 384 + 256..q * 384 + 384].fill(0);
        }
        assert!(!backward_dense_lists(&pack(&bytes)));
        let k = BackwardKernel::default_for(128, BackwardMask::ALL[2]).unwrap();
        for det in [false, true] {
            assert_eq!(backward_list_entries(&m, 0, det), ListEntries::Dense);
            assert_eq!(backward_list_entries(&m, 64, det), ListEntries::Dense);
            assert_eq!(backward_list_entries(&bare, 0, det), ListEntries::Read);
        }
        // The run-time check: deterministic only.
        assert_eq!(
            backward_list_entries(&bare, 64, true),
            ListEntries::DenseAtRunTime
        );
        assert_eq!(backward_list_entries(&bare, 64, false), ListEntries::Read);
        assert!(k.with_list_entries(ListEntries::Dense).is_ok());
        assert!(k.with_list_entries(ListEntries::DenseAtRunTime).is_ok());
        assert!(BackwardKernel::default_for(128, BackwardMask::Window)
            .unwrap()
            .with_list_entries(ListEntries::Dense)
            .is_err());
    }

    #[test]
    fn paired_key_blocks_run_where_every_head_of_a_cta_walks_one_mask_plane() {
        let tile64 = BackwardMask::Blocks {
            block_m: 64,
            block_n: 64,
        };
        let default = BackwardOptions::default();
        let k64 = backward_config(128, tile64, &default).unwrap();
        let (one, two) = ([1u8; 128 * 128], [1u8; 2 * 128 * 128]);
        let pack = |bytes: &[u8], dims: &[usize]| {
            pack_for_kernel(&DenseMask::new(bytes, dims).unwrap(), &Geometry::TILE_64X64).unwrap()
        };
        let (m1, m2) = (pack(&one, &[128, 128]), pack(&two, &[2, 128, 128]));
        let shape = |heads, kv_heads| AttentionShape {
            batch: 1,
            heads,
            kv_heads,
            seqlen_q: 128,
            seqlen_k: 128,
            head_dim: 128,
        };
        assert!(backward_paired_keys(&shape(2, 2), &m2, &k64, &default).unwrap());
        assert!(backward_paired_keys(&shape(4, 2), &m1, &k64, &default).unwrap());
        // GQA over a per-head mask: a CTA's heads walk different planes.
        assert!(!backward_paired_keys(&shape(2, 1), &m2, &k64, &default).unwrap());
        let on = BackwardOptions {
            paired_keys: Some(true),
            ..default
        };
        assert!(backward_paired_keys(&shape(2, 1), &m2, &k64, &on).is_err());
        let off = BackwardOptions {
            paired_keys: Some(false),
            ..default
        };
        assert!(!backward_paired_keys(&shape(2, 2), &m2, &k64, &off).unwrap());
        // 128x128 tiles: never; the deterministic mode (the pairs' turns): as the default.
        let k128 = backward_config(128, BackwardMask::ALL[2], &default).unwrap();
        assert!(!backward_paired_keys(&shape(2, 2), &m2, &k128, &default).unwrap());
        let det = BackwardOptions {
            deterministic: true,
            ..default
        };
        let kdet = backward_config(128, tile64, &det).unwrap();
        assert!(backward_paired_keys(&shape(2, 2), &m2, &kdet, &det).unwrap());
        assert!(!backward_paired_keys(&shape(2, 1), &m2, &kdet, &det).unwrap());
    }

    /// The options a caller that only asks for determinism passes (the Python package's:
    /// `documents_grid` and `paired_keys` left to the choice, or `Some(false)` under CUDA
    /// graph capture) never pick the documents grid, which the deterministic kernels
    /// refuse (a documents mask runs its tile lists); a 64x64 mask pairs its key blocks
    /// as the default call does.
    #[test]
    fn deterministic_calls_with_default_options_run_the_tile_lists_and_pair_as_the_default() {
        // Two causal documents of 128 tokens.
        let s = 256;
        let docs_of = |i: usize| {
            let (q, k) = (i / s, i % s);
            u8::from(k <= q && q / 128 == k / 128)
        };
        let bytes: Vec<u8> = (0..s * s).map(docs_of).collect();
        let dense = DenseMask::new(&bytes, &[s, s]).unwrap();
        let shape = AttentionShape {
            batch: 1,
            heads: 2,
            kv_heads: 2,
            seqlen_q: s,
            seqlen_k: s,
            head_dim: 128,
        };
        let docs = || {
            fragmask_masks::Documents::new(fragmask_masks::DocumentKind::Causal, vec![0, 128, 256])
                .unwrap()
        };
        let mut m128 = pack_for_kernel(&dense, &Geometry::TILE_128X128).unwrap();
        m128.attach_documents(docs()).unwrap();
        let mut m64 = pack_for_kernel(&dense, &Geometry::TILE_64X64).unwrap();
        m64.attach_documents(docs()).unwrap();
        let tile64 = BackwardMask::Blocks {
            block_m: 64,
            block_n: 64,
        };
        for capturing in [false, true] {
            let opts = |deterministic| BackwardOptions {
                deterministic,
                documents_grid: capturing.then_some(false),
                paired_keys: capturing.then_some(false),
                ..BackwardOptions::default()
            };
            // Outside capture the default call takes both; the deterministic one pairs only.
            let (plain, det) = (opts(false), opts(true));
            assert_eq!(
                backward_documents(&shape, &m128, &plain).is_some(),
                !capturing
            );
            assert!(backward_documents(&shape, &m128, &det).is_none());
            let k = backward_config(128, tile64, &plain).unwrap();
            assert_eq!(
                backward_paired_keys(&shape, &m64, &k, &plain).unwrap(),
                !capturing
            );
            let kdet = backward_config(128, tile64, &det).unwrap();
            assert!(kdet.deterministic());
            assert_eq!(
                backward_paired_keys(&shape, &m64, &kdet, &det).unwrap(),
                !capturing
            );
        }
    }
}
