//! Which kernel serves a call: the one place the runtime turns a call's head dim, mask
//! and options into a kernel configuration. The forward's plan and launch paths
//! ([`super::AttentionRunner::plan`], [`super::AttentionRunner::prepare`]) and the
//! backward's ([`super::AttentionRunner::prepare_backward`],
//! [`super::AttentionRunner::launch_backward_raw`]) ask here; the configurations
//! themselves and their limits are the kernels crate's (`AttentionKernel`,
//! `BackwardKernel`), and the split count is [`super::splits`]'. [`forward_mode`] picks
//! the forward's grid: the documents grid for a mask with document boundaries, else the
//! tile lists or the window. The warm-up paths
//! ([`super::AttentionRunner::warm_up`], [`super::AttentionRunner::warm_up_backward`])
//! compile what this module picks, so a warmed call never compiles.

use fragmask_kernels::attention::backward::{
    BackwardKernel, BackwardMask, DqReduce, STEP_M, WIDE_STEP_M,
};
use fragmask_kernels::attention::{ActDtype, AttentionKernel, ConfigError, Geometry, MaskMode};
use fragmask_masks::{MaskSource, PackedMask, Region, TransposedLists};

use super::backward::{transposed_lists, BackwardOptions};
use super::persistent::TileSteps;
use super::{blockmask, AttentionError, AttentionOptions, AttentionShape, Window};

/// The kernel configuration of `geometry` a call with `head_dim`, `mode` and `opts`
/// launches (compiles nothing; refuses unsupported stages / overlap / ping-pong / head dims).
pub fn kernel_config(
    head_dim: usize,
    mode: MaskMode,
    geometry: Geometry,
    opts: &AttentionOptions,
) -> Result<AttentionKernel, AttentionError> {
    let d = u32::try_from(head_dim)
        .map_err(|_| AttentionError::Shape(format!("head dim {head_dim} not supported")))?;
    let default =
        AttentionKernel::default_for_geometry(geometry, d, mode).map_err(AttentionError::Config)?;
    AttentionKernel::new(
        geometry,
        d,
        mode,
        opts.stages.unwrap_or(default.stages()),
        opts.overlap.unwrap_or(default.overlap()),
    )
    .and_then(|k| k.with_pingpong(opts.pingpong.unwrap_or(default.pingpong())))
    .and_then(|k| k.with_dtype(opts.dtype.unwrap_or(ActDtype::Bf16)))
    .map(|k| k.with_lazy_rescale(opts.lazy_rescale.unwrap_or(default.lazy_rescale())))
    .map(|k| k.with_lookahead(opts.lookahead.unwrap_or(default.lookahead())))
    // The default's Q registers need its overlapped loop: a call that turns the overlap
    // off keeps Q in shared memory unless it asks for them (then a ConfigError).
    .and_then(|k| {
        let q_registers = opts
            .q_registers
            .unwrap_or(default.q_registers() && k.overlap());
        k.with_q_registers(q_registers)
    })
    .map_err(AttentionError::Config)
}

/// The geometry of a call: `opts.geometry`, else the preferred geometry of its packed
/// mask's tile (`mask`), else the head dim's default. With a mask, `opts.geometry` must have
/// the mask's tile (it may pick another variant of it, such as `64x64/1`).
pub fn call_geometry(
    head_dim: usize,
    mask: Option<&PackedMask>,
    opts: &AttentionOptions,
) -> Result<Geometry, AttentionError> {
    match mask {
        Some(m) => {
            let g = blockmask::mask_geometry(m)?;
            let tile = |g: &Geometry| (g.block_m(), g.block_n(), g.consumer_warpgroups());
            match opts.geometry {
                // The mask fixes the tile; the caller may pick a variant of it (key blocks
                // per step).
                // A shared-K/V geometry reads its query blocks' own tiles.
                Some(want) if tile(&want.mask_geometry()) != tile(&g) => {
                    Err(AttentionError::MaskLayout {
                        field: "tile",
                        found: format!("{}x{}", g.block_m(), g.block_n()),
                        expected: format!(
                            "{}x{}",
                            want.mask_geometry().block_m(),
                            want.mask_geometry().block_n()
                        ),
                    })
                }
                Some(want) => Ok(want),
                None => Ok(g),
            }
        }
        None => Ok(opts.geometry.unwrap_or_else(|| {
            AttentionKernel::default_geometry(u32::try_from(head_dim).unwrap_or(0))
        })),
    }
}

/// The dense time of a head dim's default tile where it is narrower than 128x128 on the
/// same 128 rows, relative to 128x128: 0.874 at head dim 256 (128x80 against the former
/// 128x128 default, kernel time at S=16384, H=16, no mask on an H100: the A/B row
/// `fwd.d256.s16384.none` of docs/PERF.md).
pub const NARROW_DEFAULT_DENSE_TIME: f64 = 0.874;

/// Row blocks [`pack_geometry`] reads at most (spread evenly over the mask's planes and
/// row blocks), which bounds its cost to a fixed share of one pack.
pub const PACK_GEOMETRY_SAMPLED_ROW_BLOCKS: usize = 32;

/// The geometry to pack a mask `source` at for a call with `head_dim` and `opts` (a dense
/// or predicate mask that is not packed yet; a packed mask's tile is [`call_geometry`]'s):
/// `opts.geometry` if given, else the head dim's default, except where the default is a
/// narrower tile than 128x128 on the same rows (128x80 at head dim 256). There the mask
/// decides: a key tile is visited when any of its elements is visible, so a mask made of
/// 128-token blocks visits two or three 80-column tiles per kept block where 128x128
/// visits one; 128x128 is picked when the key columns the narrow tile visits, times its
/// dense speed-up ([`NARROW_DEFAULT_DENSE_TIME`]), exceed those 128x128 visits.
///
/// The columns are counted on at most [`PACK_GEOMETRY_SAMPLED_ROW_BLOCKS`] row blocks
/// ([`visited_key_columns`]); at most that many, the count is exact.
pub fn pack_geometry<S: MaskSource + ?Sized>(
    head_dim: usize,
    source: &S,
    opts: &AttentionOptions,
) -> Result<Geometry, AttentionError> {
    if let Some(g) = opts.geometry {
        return Ok(g);
    }
    let d = u32::try_from(head_dim)
        .map_err(|_| AttentionError::Shape(format!("head dim {head_dim} not supported")))?;
    let default = AttentionKernel::default_geometry(d);
    let wide = Geometry::TILE_128X128;
    let narrower_on_same_rows = default.block_m() == wide.block_m()
        && default.block_n() < wide.block_n()
        && wide.supports_head_dim(d);
    if !narrower_on_same_rows {
        return Ok(default);
    }
    let block_m = wide.block_m() as usize;
    let block_ns = [default.block_n() as usize, wide.block_n() as usize];
    let [narrow_cols, wide_cols] =
        visited_key_columns(source, block_m, block_ns, PACK_GEOMETRY_SAMPLED_ROW_BLOCKS);
    if narrow_cols as f64 * NARROW_DEFAULT_DENSE_TIME > wide_cols as f64 {
        Ok(wide)
    } else {
        Ok(default)
    }
}

/// The key columns a kernel with `block_m`-row tiles and each of `block_ns` key-tile
/// widths visits, over up to `max_row_blocks` row blocks of `source` (every row block
/// when there are that many or fewer, else that many spread evenly over its planes and
/// row blocks): for each row block, the number of its `block_n`-column tiles holding a
/// visible element, times `block_n`. With every row block read, entry i equals
/// `block_ns[i]` times the packer's partial plus full tiles at that tile.
///
/// The row block is read once, in cells of `gcd(block_ns)` columns: a cell is decided by
/// the source's [`MaskSource::region`] when it knows, else by its rows until one shows a
/// visible element.
pub fn visited_key_columns<S: MaskSource + ?Sized, const N: usize>(
    source: &S,
    block_m: usize,
    block_ns: [usize; N],
    max_row_blocks: usize,
) -> [u64; N] {
    let mut columns = [0u64; N];
    let shape = source.shape();
    let (sq, sk) = (shape.seqlen_q, shape.seqlen_k);
    let cell = block_ns.iter().copied().fold(0, gcd);
    if block_m == 0 || cell == 0 || sq == 0 || sk == 0 {
        return columns;
    }
    let m_blocks = sq.div_ceil(block_m);
    let planes = shape.batch.saturating_mul(shape.heads);
    let row_blocks = planes.saturating_mul(m_blocks);
    let sampled = row_blocks.min(max_row_blocks);
    let cells = sk.div_ceil(cell);
    let mut occupied = vec![false; cells];
    let mut bits = vec![0u64; cell.div_ceil(64)];
    for i in 0..sampled {
        // Evenly spread: row block i * row_blocks / sampled (u128: no overflow).
        let r = (i as u128 * row_blocks as u128 / sampled as u128) as usize;
        let (plane, m) = (r / m_blocks, r % m_blocks);
        let (batch, head) = (plane / shape.heads, plane % shape.heads);
        let rows = m * block_m..((m + 1) * block_m).min(sq);
        for (c, slot) in occupied.iter_mut().enumerate() {
            let cols = c * cell..((c + 1) * cell).min(sk);
            *slot = match source.region(batch, head, rows.clone(), cols.clone()) {
                Region::Empty => false,
                Region::Full => true,
                Region::Unknown => rows.clone().any(|q| {
                    bits.fill(0);
                    source.row_bits(batch, head, q, cols.start, cols.len(), &mut bits);
                    bits.iter().any(|&w| w != 0)
                }),
            };
        }
        for (total, &block_n) in columns.iter_mut().zip(block_ns.iter()) {
            let per_tile = block_n / cell;
            let tiles = occupied
                .chunks(per_tile)
                .filter(|tile| tile.iter().any(|&o| o))
                .count();
            *total += tiles as u64 * block_n as u64;
        }
    }
    columns
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The kernel a call launches: [`call_geometry`] then [`kernel_config`].
pub fn call_kernel(
    head_dim: usize,
    mode: MaskMode,
    mask: Option<&PackedMask>,
    opts: &AttentionOptions,
) -> Result<AttentionKernel, AttentionError> {
    let g = call_geometry(head_dim, mask, opts)?;
    let kernel = kernel_config(head_dim, mode, g, opts)?;
    // Forced choices the kernel cannot take fail here, before any GPU work: the plan's own
    // checks ([`forward_persistent`], [`shared_kv`]) with the call's requested splits.
    let splits = opts.splits.unwrap_or(1);
    if opts.persistent == Some(true) {
        if splits > 1 {
            return Err(AttentionError::Config(ConfigError::Persistent(format!(
                "persistent CTAs do not run split-KV ({splits} splits)"
            ))));
        }
        kernel
            .with_persistent(true)
            .map_err(AttentionError::Config)?;
    }
    if opts.shared_kv == Some(true) {
        shared_kv(&kernel, splits, opts, || 0.0)?;
    }
    Ok(kernel)
}

/// The share of a plan's K/V block loads at or under which the shared-K/V tile is the
/// default (its loads over the one-block tile's, [`super::shared_kv::PairTable::load_ratio`]).
/// Measured on one H100 (write-up 002, interleaved A/B against the one-block tile's build):
/// loads 0.88 of the one-block tile's (10% of blocks) ran 0.962 and 0.985 (48-64-token
/// blocks) of its time, loads 0.72 (50%) 0.956 and 0.919; between 0.9 and 1 the gain is
/// unmeasured, so the one-block tile stays there.
pub const SHARED_KV_MAX_LOAD_RATIO: f64 = 0.9;

/// The kernel of a tile-list call on the 64-token tile ([`Geometry::TILE_64X64`], chosen
/// from its mask with no geometry named) when its query blocks share K/V
/// ([`Geometry::TILE_64X64_SHARED`]), or `None` to keep `kernel`. `opts.shared_kv`
/// decides when set (`Some(true)` is an error where the call cannot have it: another
/// tile, split-KV, persistent CTAs, a head dim the tile does not hold). Unset: on for
/// one split where the pairs load at most [`SHARED_KV_MAX_LOAD_RATIO`] of the one-block
/// tile's K/V blocks (`load_ratio`, computed only then).
pub fn shared_kv(
    kernel: &AttentionKernel,
    splits: u32,
    opts: &AttentionOptions,
    load_ratio: impl FnOnce() -> f64,
) -> Result<Option<AttentionKernel>, AttentionError> {
    let g = kernel.geometry();
    let shared = Geometry::TILE_64X64_SHARED;
    let named = opts.geometry.is_some();
    let fits = kernel.mask() == MaskMode::Blocks
        && g == Geometry::TILE_64X64
        && splits == 1
        && opts.persistent != Some(true)
        && shared.supports_head_dim(kernel.head_dim());
    let on = match opts.shared_kv {
        Some(false) => false,
        Some(true) if fits => true,
        Some(true) => {
            return Err(AttentionError::Config(ConfigError::SharedKv(format!(
                "shared K/V needs a tile-list call on the 64x64 tile with one split and no \
                 persistent CTAs, at a head dim the {} tile holds (this call: {}, {} split(s))",
                shared.name(),
                g.name(),
                splits
            ))))
        }
        None => fits && !named && load_ratio() <= SHARED_KV_MAX_LOAD_RATIO,
    };
    if !on {
        return Ok(None);
    }
    kernel_config(kernel.head_dim() as usize, kernel.mask(), shared, opts).map(Some)
}

/// The forward's mask mode for a call with a packed mask: the documents grid
/// ([`MaskMode::Documents`], FlashAttention's varlen schedule over the mask's document
/// boundaries, [`PackedMask::documents`]) when the mask has documents, the call has no
/// split-KV (`opts.splits` unset or 1) and `Sq == Sk` equals the documents' length;
/// otherwise the tile lists ([`MaskMode::Blocks`]). A call with no packed mask runs the
/// window mode. Any layout of q, k and v serves both (the tensor maps take the strides).
pub fn forward_mode(
    shape: &AttentionShape,
    mask: Option<&PackedMask>,
    opts: &AttentionOptions,
) -> MaskMode {
    let Some(mask) = mask else {
        return MaskMode::Window;
    };
    let documents = mask
        .documents()
        .is_some_and(|d| shape.seqlen_q == shape.seqlen_k && shape.seqlen_q == d.seqlen());
    if documents && opts.splits.is_none_or(|n| n == 1) {
        MaskMode::Documents
    } else {
        MaskMode::Blocks
    }
}

/// Whether a forward of `kernel` with `splits` split-KV splits on `slots` SM slots (SMs
/// times the geometry's CTAs per SM) runs persistent CTAs
/// ([`AttentionKernel::with_persistent`], docs/architecture.md "Persistent forward").
/// `steps` are its work tiles' steps, where the caller computed them (always when
/// `opts.persistent` is `Some(true)` or [`persistent_by_default`] holds).
/// `opts.persistent` decides when set: `Some(true)` is an error with split-KV, where the
/// second Q buffer does not fit or past [`super::persistent::MAX_WORK_TILES`]. Unset:
/// [`persistent_by_default`], one split, more tiles than slots, a table that balances
/// ([`TileSteps::balances`], or dealt longest first: `section` above 1, [`head_section`],
/// or the documents grid, whose items each head deals longest first,
/// [`super::documents::work_items`]) and walks of at most [`PERSISTENT_MAX_MEAN_STEPS`] on
/// average. Dealt longest first, the last tiles dealt are the shortest and the CTAs end
/// together: causal S = 4096 at H = 16, where the plain table does not balance, took 0.969
/// of the one-tile grid's time in the same order (an H100, 2 rounds: 0.1167 against 0.1204
/// ms); 12 causal documents at S = 4096 and 8192, where it does not balance either, 0.978
/// and 0.973 (an H200, 3 rounds; `bench/results/session-2026-11-27k/knobs/`).
pub fn forward_persistent(
    kernel: &AttentionKernel,
    splits: u32,
    steps: Option<&TileSteps>,
    slots: usize,
    section: u32,
    opts: &AttentionOptions,
) -> Result<bool, AttentionError> {
    match opts.persistent {
        Some(false) => Ok(false),
        Some(true) if splits > 1 => Err(AttentionError::Config(ConfigError::Persistent(format!(
            "persistent CTAs do not run split-KV ({splits} splits)"
        )))),
        Some(true) => {
            super::persistent::tile_count(steps.map_or(0, TileSteps::len), 1, 1)?;
            kernel
                .with_persistent(true)
                .map(|_| true)
                .map_err(AttentionError::Config)
        }
        None => Ok(splits == 1
            && persistent_by_default(kernel)
            && steps.is_some_and(|s| {
                s.len() > slots
                    && s.len() <= super::persistent::MAX_WORK_TILES
                    && (section > 1 || kernel.mask() == MaskMode::Documents || s.balances(slots))
                    && s.mean_at_most(PERSISTENT_MAX_MEAN_STEPS)
            })),
    }
}

/// The longest mean walk (key steps per work tile) that runs persistent CTAs by default:
/// the saving is per tile, so long walks gain nothing. An H100, against the one-tile grid:
/// causal S = 16384 (64.5 steps on average) 0.994 twice; no mask S = 16384 (128 steps)
/// 1.004 and 1.025 (docs/architecture.md "Persistent forward").
pub const PERSISTENT_MAX_MEAN_STEPS: u32 = 96;

/// The kernels that run persistent CTAs by default, where they measured faster than the
/// one-tile grid (an H100, interleaved, 2 rounds; docs/architecture.md "Persistent
/// forward"): the window walk and the documents grid on the 128x128 tile at head dim 128
/// (causal window 1024 at S = 16384 0.968 of the one-tile time, 12 documents 0.993,
/// causal S = 8192 0.990, S = 16384 0.994, no mask S = 4096 0.992). Not the tile lists
/// (write-up 002's 10% and 50% of 64-token blocks 1.009 and 1.042, random 50% of tokens
/// 1.118) nor 192x128 at head dim 64 (1.009 causal, 1.014 no mask).
pub fn persistent_by_default(kernel: &AttentionKernel) -> bool {
    kernel.mask() != MaskMode::Blocks
        && kernel.geometry() == Geometry::TILE_128X128
        && kernel.head_dim() == 128
        && kernel
            .geometry()
            .persistent_fits(kernel.head_dim(), kernel.stages())
}

/// The L2 bytes a launch-order section's K/V may take: FlashAttention-4's
/// `SingleTileLPTScheduler` budget (50 MiB, an H100's L2 being 50 MB).
pub const SECTION_L2_BYTES: u64 = 50 << 20;

/// The estimated gain below which a call keeps the plain launch order: sections are taken
/// only where they end the launch at least 2% earlier ([`head_section`]).
pub const SECTION_MIN_GAIN: f64 = 0.02;

/// Most work tiles whose launch [`head_section`] estimates; a call with more has hundreds
/// of tiles per SM slot and no tail for the order to remove (the plain order).
pub const SECTION_MAX_ESTIMATED_TILES: usize = 1 << 16;

/// The (head, batch) planes per section of a forward's launch order
/// (`AttentionParams::head_section`; docs/architecture.md, "Launch order") for a call of
/// `splits` splits on `slots` SM slots: `opts.head_section` when set (at least 1), else
/// [`l2_head_section`] for a causal walk of the window mode without split-KV where the
/// list-scheduling estimate ([`super::persistent::makespan`] over the walk's steps) ends that
/// order's launch at least [`SECTION_MIN_GAIN`] earlier than the plain order (few tiles per
/// slot: causal S = 4096 and 8192 at H = 16, head dim 64 at S = 16384), else 1 (the plain
/// order; an H100, interleaved: it kept S = 16384 causal at H = 16 and GQA within the noise).
pub fn head_section(
    shape: &AttentionShape,
    kernel: &AttentionKernel,
    params: &fragmask_kernels::attention::AttentionParams,
    splits: u32,
    slots: usize,
    opts: &AttentionOptions,
) -> Result<u32, AttentionError> {
    if let Some(n) = opts.head_section {
        return if n == 0 {
            Err(AttentionError::Shape(
                "the launch order's head section must be at least 1".into(),
            ))
        } else {
            Ok(n)
        };
    }
    let causal_walk = kernel.mask() == MaskMode::Window
        && params.window_left >= fragmask_kernels::attention::WINDOW_INFINITE
        && params.window_right < fragmask_kernels::attention::WINDOW_INFINITE;
    let section = l2_head_section(shape, kernel);
    if !causal_walk || splits > 1 || section <= 1 {
        return Ok(1);
    }
    let steps = TileSteps::PerRowBlock {
        steps: super::persistent::window_steps(params, &kernel.geometry()),
        planes: shape.heads.saturating_mul(shape.batch),
    };
    if steps.len() <= slots || steps.len() > SECTION_MAX_ESTIMATED_TILES {
        return Ok(1);
    }
    let plain = super::persistent::makespan(&steps, slots, 1) as f64;
    let sections = super::persistent::makespan(&steps, slots, section as usize) as f64;
    Ok(if sections < plain * (1.0 - SECTION_MIN_GAIN) {
        section
    } else {
        1
    })
}

/// FlashAttention-4's L2 section of a causal call (`SingleTileLPTScheduler`): the largest
/// power of two of KV heads whose K and V (`Sk * 2 D` elements each) fit in
/// [`SECTION_L2_BYTES`], at most the call's KV heads, times the query heads per KV head (a
/// section's planes share those K/V heads); 1 where `kv_heads` does not divide `heads`.
pub fn l2_head_section(shape: &AttentionShape, kernel: &AttentionKernel) -> u32 {
    if shape.kv_heads == 0 || shape.heads % shape.kv_heads != 0 {
        return 1;
    }
    let element = kernel.dtype().size() as u64;
    let kv_head_bytes = (shape.seqlen_k as u64)
        .saturating_mul(2 * shape.head_dim as u64)
        .saturating_mul(element)
        .max(1);
    let fit = (SECTION_L2_BYTES / kv_head_bytes).max(1);
    let kv_section = (1u64 << fit.ilog2()).min(shape.kv_heads as u64);
    let group = (shape.heads / shape.kv_heads) as u64;
    u32::try_from(kv_section.saturating_mul(group)).unwrap_or(u32::MAX)
}

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
    use fragmask_kernels::attention::WINDOW_INFINITE;
    let (sq, sk) = (i64::from(params.seqlen_q), i64::from(params.seqlen_k));
    let (cta_n, step) = (i64::from(cta_n.max(1)), i64::from(step_m.max(1)));
    let diag = i64::from(params.diag_offset);
    (0..((sk + cta_n - 1) / cta_n).max(0))
        .map(|n| {
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
            let steps = if lo > hi {
                0
            } else {
                hi / step - lo / step + 1
            };
            u32::try_from(steps.saturating_mul(i64::from(group))).unwrap_or(u32::MAX)
        })
        .collect()
}

/// The (KV head, batch) planes per section of the backward's launch order
/// (`BackwardParams::head_section`, `key_tile::WINDOW_ORDER`) on `slots` SMs: for a
/// causal walk of the window mode on the whole sequence, outside the deterministic mode
/// and with one CTA per key tile, FlashAttention-4's L2 section (the largest power of two
/// of planes whose query head's Q, dO and f32 dQ rows fit in [`SECTION_L2_BYTES`]; a CTA
/// walks its group's query heads one after another) where the
/// list-scheduling estimate ([`super::persistent::makespan`]) ends the launch at least
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
    let causal_walk =
        params.window_left >= WINDOW_INFINITE && params.window_right < WINDOW_INFINITE;
    if kernel.mask() != BackwardMask::Window
        || kernel.deterministic()
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
    let plain = super::persistent::makespan(&steps, slots, 1) as f64;
    let sections = super::persistent::makespan(&steps, slots, section) as f64;
    if sections < plain * (1.0 - SECTION_MIN_GAIN) {
        u32::try_from(section).unwrap_or(1)
    } else {
        1
    }
}

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
            "paired key blocks take a 64x64 mask's tile at head dim 64 or 128, not \
             deterministic, without GQA over a per-head mask: not {}",
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
/// above 1 where the grid's order stays: masks, the deterministic mode (its CTAs wait for
/// lower-ranked ones in index order), column-split CTAs.
fn check_backward_head_section(
    k: &BackwardKernel,
    section: Option<u32>,
) -> Result<(), AttentionError> {
    match section {
        Some(0) => Err(AttentionError::Shape(
            "the backward's head section must be at least 1".into(),
        )),
        Some(n)
            if n > 1
                && (k.mask() != BackwardMask::Window
                    || k.deterministic()
                    || k.grid_split() != 1) =>
        {
            Err(AttentionError::Shape(format!(
                "a backward head section of {n} takes the window walk (no mask, causal, \
                 windows) outside the deterministic mode, one CTA per key tile: not {}",
                k.label()
            )))
        }
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
    use fragmask_kernels::attention::{AttentionParams, WINDOW_INFINITE};
    use fragmask_masks::DenseMask;

    use super::*;
    use crate::attention::blockmask::pack_for_kernel;
    use crate::attention::persistent::{tile_steps, window_steps};

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
        #![proptest_config(super::super::proptest_ci::config(64))]
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
    fn backward_launch_sections_only_where_the_causal_walk_ends_earlier() {
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
        // The deterministic mode keeps the grid's order, and refuses a named section.
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
        assert!(backward_config(128, BackwardMask::Window, &named(4, true)).is_err());
        assert!(backward_config(128, BackwardMask::Window, &named(0, false)).is_err());
        assert!(backward_config(128, BackwardMask::Window, &named(4, false)).is_ok());
        let lists = BackwardMask::Blocks {
            block_m: 128,
            block_n: 128,
        };
        assert!(backward_config(128, lists, &named(4, false)).is_err());
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
        // Head dim 128 on two warpgroups takes it; the deterministic mode never does.
        let modes = BackwardMask::ALL;
        let k = backward_config(128, modes[0], &BackwardOptions::default()).unwrap();
        assert!(k.dq_writer_fits());
        let det = BackwardOptions {
            deterministic: true,
            ..BackwardOptions::default()
        };
        assert!(!backward_config(128, modes[0], &det)
            .unwrap()
            .dq_writer_fits());
    }

    #[test]
    fn shared_kv_by_default_only_for_one_split_64_token_lists_that_load_less() {
        let tile =
            AttentionKernel::default_for_geometry(Geometry::TILE_64X64, 128, MaskMode::Blocks)
                .unwrap();
        let def = AttentionOptions::default();
        let pick = |k: &AttentionKernel, splits, opts: &AttentionOptions, ratio: f64| {
            shared_kv(k, splits, opts, || ratio).map(|k| k.map(|k| k.geometry()))
        };
        let shared = Some(Geometry::TILE_64X64_SHARED);
        assert_eq!(pick(&tile, 1, &def, 0.88).unwrap(), shared);
        assert_eq!(
            pick(&tile, 1, &def, SHARED_KV_MAX_LOAD_RATIO).unwrap(),
            shared
        );
        assert_eq!(pick(&tile, 1, &def, 0.95).unwrap(), None);
        // Split-KV, a named geometry, persistent CTAs, another tile or mode: the one-block tile.
        assert_eq!(pick(&tile, 4, &def, 0.5).unwrap(), None);
        let named = AttentionOptions {
            geometry: Some(Geometry::TILE_64X64),
            ..def
        };
        assert_eq!(pick(&tile, 1, &named, 0.5).unwrap(), None);
        let persistent = AttentionOptions {
            persistent: Some(true),
            ..def
        };
        assert_eq!(pick(&tile, 1, &persistent, 0.5).unwrap(), None);
        let wide = AttentionKernel::default_for(128, MaskMode::Blocks).unwrap();
        assert_eq!(pick(&wide, 1, &def, 0.5).unwrap(), None);
        // Asked for: on wherever it fits, whatever the loads; an error elsewhere.
        let on = AttentionOptions {
            shared_kv: Some(true),
            ..def
        };
        let forced = shared_kv(&tile, 1, &on, || unreachable!("not weighed when asked for"));
        assert_eq!(forced.unwrap().map(|k| k.stages()), Some(3));
        assert!(pick(&tile, 4, &on, 0.5).is_err());
        assert!(pick(&wide, 1, &on, 0.5).is_err());
        let off = AttentionOptions {
            shared_kv: Some(false),
            ..def
        };
        assert_eq!(pick(&tile, 1, &off, 0.1).unwrap(), None);
    }

    #[test]
    fn persistent_ctas_by_default_on_long_window_walks_of_the_128_tile_only() {
        let opts = AttentionOptions::default();
        let k = |d, mode| AttentionKernel::default_for(d, mode).unwrap();
        // H = 16, S x S, 132 SMs: the suite's forward rows.
        let window = |s: i32, left: i32, right: i32, g: Geometry| {
            let p = AttentionParams {
                seqlen_q: s,
                seqlen_k: s,
                m_blocks: g.m_blocks(s as u32) as i32,
                n_blocks: g.n_blocks(s as u32) as i32,
                window_left: left,
                window_right: right,
                heads: 16,
                batch: 1,
                ..AttentionParams::default()
            };
            tile_steps(&p, MaskMode::Window, None, &g, 16).unwrap()
        };
        let g = Geometry::TILE_128X128;
        let inf = WINDOW_INFINITE;
        let on = |kernel: &AttentionKernel, steps| {
            forward_persistent(kernel, 1, Some(&steps), 132, 1, &opts).unwrap()
        };
        let k128 = k(128, MaskMode::Window);
        assert!(on(&k128, window(16384, 1024, 0, g)));
        assert!(on(&k128, window(16384, inf, 0, g)));
        assert!(on(&k128, window(8192, inf, 0, g)));
        assert!(on(&k128, window(4096, inf, inf, g)));
        // No mask at S = 16384: 128 steps per tile, nothing to save.
        assert!(!on(&k128, window(16384, inf, inf, g)));
        assert!(on(&k128, window(8192, inf, inf, g)));
        // Causal S = 4096: the longest tile is half a CTA's share; dealt longest first
        // (launch-order sections), the table balances.
        assert!(!on(&k128, window(4096, inf, 0, g)));
        assert!(
            forward_persistent(&k128, 1, Some(&window(4096, inf, 0, g)), 132, 16, &opts).unwrap()
        );
        // Few tiles (one wave), split-KV, the lists, head dim 64: the one-tile grid.
        assert!(!on(&k128, window(1024, inf, inf, g)));
        assert!(
            !forward_persistent(&k128, 2, Some(&window(16384, 1024, 0, g)), 132, 1, &opts).unwrap()
        );
        assert!(!on(&k(128, MaskMode::Blocks), window(16384, 1024, 0, g)));
        // 12 causal documents of S = 8192, one of 4096 tokens: its last row block is more
        // than a third of a CTA's share, but each head deals its items longest first.
        let starts: Vec<u32> = std::iter::once(0)
            .chain((0..=11).map(|d| 4096 + d * 4096 / 11))
            .collect();
        let docs =
            fragmask_masks::Documents::new(fragmask_masks::DocumentKind::Causal, starts).unwrap();
        let items = crate::attention::documents::work_items(&docs, &g);
        let doc_steps = TileSteps::PerRowBlock {
            steps: crate::attention::persistent::document_steps(&items, &g),
            planes: 16,
        };
        assert!(!doc_steps.balances(132));
        assert!(on(&k(128, MaskMode::Documents), doc_steps));
        let g64 = Geometry::TILE_192X128;
        assert!(!on(&k(64, MaskMode::Window), window(16384, 1024, 0, g64)));
        // The options decide when set.
        let force = |persistent| AttentionOptions {
            persistent: Some(persistent),
            ..opts
        };
        let short = window(4096, inf, 0, g);
        assert!(forward_persistent(&k128, 1, Some(&short), 132, 1, &force(true)).unwrap());
        assert!(!forward_persistent(&k128, 1, Some(&short), 132, 1, &force(false)).unwrap());
        assert!(forward_persistent(&k128, 3, Some(&short), 132, 1, &force(true)).is_err());
        let d256 = k(256, MaskMode::Window);
        assert!(forward_persistent(&d256, 1, Some(&short), 132, 1, &force(true)).is_err());
        assert_eq!(
            window_steps(&AttentionParams::default(), &g),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn causal_calls_launch_in_l2_sections_where_the_estimate_ends_them_earlier() {
        let opts = AttentionOptions::default();
        let section =
            |heads, kv_heads, s: usize, d: usize, left, right, opts: &AttentionOptions| {
                let shape = AttentionShape {
                    batch: 1,
                    heads,
                    kv_heads,
                    seqlen_q: s,
                    seqlen_k: s,
                    head_dim: d,
                };
                let k = AttentionKernel::default_for(d as u32, MaskMode::Window).unwrap();
                let p = AttentionParams {
                    seqlen_q: s as i32,
                    seqlen_k: s as i32,
                    m_blocks: k.m_blocks(s as u32) as i32,
                    n_blocks: k.n_blocks(s as u32) as i32,
                    window_left: left,
                    window_right: right,
                    heads: heads as i32,
                    kv_heads: kv_heads as i32,
                    batch: 1,
                    ..AttentionParams::default()
                };
                (
                    l2_head_section(&shape, &k),
                    head_section(&shape, &k, &p, 1, 132, opts),
                )
            };
        let inf = WINDOW_INFINITE;
        let chosen = |h, hk, s, d| section(h, hk, s, d, inf, 0, &opts).1.unwrap();
        // K and V of one head: 8 MiB at S = 16384 (4 heads fit 50 MiB), 2 MiB at 4096.
        assert_eq!(section(16, 16, 16384, 128, inf, 0, &opts).0, 4);
        assert_eq!(section(32, 8, 16384, 128, inf, 0, &opts).0, 16);
        assert_eq!(section(64, 8, 16384, 128, inf, 0, &opts).0, 32);
        assert_eq!(section(8, 2, 1 << 20, 128, inf, 0, &opts).0, 4);
        // Few tiles per SM: the plain order's tail is long, the sections are taken
        // (causal S = 4096 and 8192 at H = 16; head dim 64's 192-row tiles at S = 16384).
        assert_eq!(chosen(16, 16, 4096, 128), 16);
        assert_eq!(chosen(16, 16, 8192, 128), 8);
        assert_eq!(chosen(16, 16, 16384, 64), 8);
        // Many tiles per SM: no tail to remove, the plain order.
        assert_eq!(chosen(16, 16, 16384, 128), 1);
        assert_eq!(chosen(32, 8, 16384, 128), 1);
        assert_eq!(chosen(64, 8, 16384, 128), 1);
        assert_eq!(chosen(16, 16, 16384, 256), 1);
        // One wave: nothing to order.
        assert_eq!(chosen(2, 2, 1024, 128), 1);
        // No mask and a window keep the plain order.
        assert_eq!(section(16, 16, 4096, 128, inf, inf, &opts).1.unwrap(), 1);
        assert_eq!(section(16, 16, 4096, 128, 1024, 0, &opts).1.unwrap(), 1);
        // The option decides when set; 0 is an error.
        let with = |n| AttentionOptions {
            head_section: Some(n),
            ..opts
        };
        assert_eq!(
            section(16, 16, 16384, 128, inf, inf, &with(3)).1.unwrap(),
            3
        );
        assert!(section(16, 16, 4096, 128, inf, 0, &with(0)).1.is_err());
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
        // 128x128 tiles and the deterministic mode: never.
        let k128 = backward_config(128, BackwardMask::ALL[2], &default).unwrap();
        assert!(!backward_paired_keys(&shape(2, 2), &m2, &k128, &default).unwrap());
        let det = BackwardOptions {
            deterministic: true,
            ..default
        };
        let kdet = backward_config(128, tile64, &det).unwrap();
        assert!(!backward_paired_keys(&shape(2, 2), &m2, &kdet, &det).unwrap());
        assert!(backward_paired_keys(&shape(2, 2), &m2, &kdet, &on).is_err());
    }

    #[test]
    fn a_mask_fixes_the_tile_and_the_caller_may_pick_its_variant() {
        let dense = DenseMask::new(&[1u8; 128 * 128], &[128, 128]).unwrap();
        let m = pack_for_kernel(&dense, &Geometry::TILE_64X64).unwrap();
        let with = |g: Option<Geometry>| AttentionOptions {
            geometry: g,
            ..AttentionOptions::default()
        };
        assert_eq!(
            call_geometry(128, Some(&m), &with(None)).unwrap(),
            Geometry::TILE_64X64
        );
        assert_eq!(
            call_geometry(128, Some(&m), &with(Some(Geometry::TILE_64X64_SINGLE))).unwrap(),
            Geometry::TILE_64X64_SINGLE
        );
        let e = call_geometry(128, Some(&m), &with(Some(Geometry::TILE_128X128))).unwrap_err();
        assert!(e.to_string().contains("tile = 64x64"), "{e}");
        // Without a mask: the head dim's default tile.
        for (d, g) in [
            (64, Geometry::TILE_192X128),
            (128, Geometry::TILE_128X128),
            (256, Geometry::TILE_128X80),
        ] {
            assert_eq!(call_geometry(d, None, &with(None)).unwrap(), g);
        }
    }
}
