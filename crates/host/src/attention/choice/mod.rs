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

use fragmask_kernels::attention::{
    ActDtype, AttentionKernel, ConfigError, Geometry, ListEntries, MaskMode,
};
use fragmask_masks::{MaskSource, PackedMask, Region};

use super::persistent::TileSteps;
use super::{blockmask, AttentionError, AttentionOptions, AttentionShape};

mod backward;
#[cfg(test)]
mod deterministic;

pub use backward::*;

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
        // An explicit persistent call takes the stages that fit beside its second Q tile.
        opts.stages.unwrap_or_else(|| match opts.persistent {
            Some(true) => geometry
                .persistent_stages(d, default.stages())
                .unwrap_or(default.stages()),
            _ => default.stages(),
        }),
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
/// default (its loads over the one-block tile's, [`super::shared_kv::PairTable::load_ratio`]):
/// only pairs of query blocks whose lists are nearly the same. Measured on one H200 at
/// ddc919c (write-up 002's N=23296, H=12, D=128; the one-block tile (`--shared-kv off`)
/// over the shared tile, 3 interleaved pairs; `bench/results/session-2026-11-29b/`): at 10%
/// of the blocks, pairs sharing their whole lists (loads 0.500) 1.048, 80% of them (0.597)
/// 0.966, 50% (0.750) 0.958, uniform random lists (0.882) 0.879; at 50% of the blocks
/// (0.500 / 0.599 / 0.716 / 0.716) 1.026, 1.000, 0.960, 0.943. (On an H100 at 44941b3,
/// before the one-block loop's later gains, uniform random lists ran 0.96 on the shared tile.)
pub const SHARED_KV_MAX_LOAD_RATIO: f64 = 0.55;

/// The head dims at which a forward over lists built on the GPU checks their density when
/// it runs ([`list_entries`]). Measured on one H200 through the Python op against the
/// list-reading kernels (S=16384, H=16, 2 rounds, `bench/results/session-2026-11-29g/call6/`):
/// head dim 64 random 50% 0.967; head dim 256 random 50% 0.968, top-k S/8 0.951,
/// block-sparse 10% 0.986 (S=4096: 0.977); head dim 128 random 50% 0.999, top-k 1.002,
/// random 10% 0.996, but block-sparse 10% 1.015 (S=4096: 1.013), whose partial steps pay the
/// check's read path (8–21 more instructions per step) and gain nothing: head dim 128 reads.
pub const RUN_TIME_DENSITY_HEAD_DIMS: [u32; 2] = [64, 256];

/// How a forward of `kernel` in `mode` over `mask` gets its lists' entries
/// ([`AttentionKernel::with_list_entries`]; docs/masks.md, "Dense tile lists"), tile lists
/// off the shared-K/V tile only: computed where the host's lists hold every block of every
/// row as partial, in order (`fragmask_masks::BlockLists::dense_partial`); computed where
/// the count says so at run time for lists built on the GPU that come with their
/// partial-tile count (`partial_count`, [`crate::device_lists::RawMaskLists::partial_count`], nonzero), at
/// the head dims where that paid ([`RUN_TIME_DENSITY_HEAD_DIMS`]); read otherwise.
pub fn list_entries(
    kernel: &AttentionKernel,
    mode: MaskMode,
    mask: &PackedMask,
    partial_count: u64,
) -> ListEntries {
    if mode != MaskMode::Blocks || kernel.geometry().shared_kv() {
        ListEntries::Read
    } else if mask.lists().dense_partial() {
        ListEntries::Dense
    } else if partial_count != 0 && RUN_TIME_DENSITY_HEAD_DIMS.contains(&kernel.head_dim()) {
        ListEntries::DenseAtRunTime
    } else {
        ListEntries::Read
    }
}

/// The head dim at which the shared-K/V tile can be the default. At head dim 64 the
/// one-block tile was faster even on pairs that share their whole lists (one H200, 3433c24,
/// write-up 002's N=23296, H=12, 10% of blocks, 3 interleaved pairs: the one-block tile ran
/// 0.856 of the shared tile's time there, and the shared tile 1.354 / 1.259 of the one-block
/// tile's on uniform random lists at 10% / 50%; `bench/results/session-2026-11-29b/call6/`).
pub const SHARED_KV_DEFAULT_HEAD_DIM: u32 = 128;

/// Whether pairs loading `load_ratio` of the one-block tile's K/V blocks make the
/// shared-K/V tile the default (at [`SHARED_KV_DEFAULT_HEAD_DIM`]).
pub fn shared_kv_pays(load_ratio: f64) -> bool {
    load_ratio <= SHARED_KV_MAX_LOAD_RATIO
}

/// The kernel of a tile-list call on the 64-token tile ([`Geometry::TILE_64X64`], chosen
/// from its mask with no geometry named) when its query blocks share K/V
/// ([`Geometry::TILE_64X64_SHARED`]), or `None` to keep `kernel`. `opts.shared_kv`
/// decides when set (`Some(true)` is an error where the call cannot have it: another
/// tile, split-KV, persistent CTAs, a head dim the tile does not hold). Unset: on for
/// one split at [`SHARED_KV_DEFAULT_HEAD_DIM`] where the pairs load at most
/// [`SHARED_KV_MAX_LOAD_RATIO`] of the one-block tile's K/V blocks (`load_ratio`, computed
/// only then).
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
        // Not by default under an asked-for split tail, which runs on the one-block tile.
        None => {
            fits && !named
                && !opts.tail_asked()
                && kernel.head_dim() == SHARED_KV_DEFAULT_HEAD_DIM
                && shared_kv_pays(load_ratio())
        }
    };
    if !on {
        return Ok(None);
    }
    kernel_config(kernel.head_dim() as usize, kernel.mask(), shared, opts).map(Some)
}

/// The forward's mask mode for a call with a packed mask: the documents grid
/// ([`MaskMode::Documents`], FlashAttention's varlen schedule over the mask's document
/// boundaries, [`PackedMask::documents`]) when the mask has documents, the call has no
/// split-KV (`opts.splits` unset or 1) and asks for no split tail, and `Sq == Sk` equals
/// the documents' length;
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
    // A call asking for the split tail runs the tile lists on the one-tile grid it needs.
    if documents && opts.splits.is_none_or(|n| n == 1) && !opts.tail_asked() {
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
            && !opts.tail_asked()
            && persistent_by_default(kernel)
            && steps.is_some_and(|s| {
                s.len() > slots
                    && s.len() <= super::persistent::MAX_WORK_TILES
                    && (section > 1 || kernel.mask() == MaskMode::Documents || s.balances(slots))
                    && s.mean_at_most(PERSISTENT_MAX_MEAN_STEPS)
            })),
    }
}

/// The split tail of a forward (docs/architecture.md, "Split tail";
/// [`super::splits::plan_tail`]) over `tiles` work tiles on `slots` SM slots, or None.
/// It runs on the global one-tile grid in its plain order: one split, no persistent CTAs,
/// one plane per launch-order section, neither the shared-K/V tile nor the documents grid.
/// `opts.tail` names the tail (and turns it on); `opts.tail_split` `Some(true)` asks for
/// the planner's tail whatever it gains (an error where the call cannot have one),
/// `Some(false)` turns it off; unset, the planner's where it gains
/// [`super::splits::TAIL_MIN_GAIN`] on a kernel of [`tail_by_default`]. `steps` (the
/// tiles' key steps) is asked for only
/// where a tail is weighed.
#[allow(clippy::too_many_arguments)]
pub fn forward_tail(
    kernel: &AttentionKernel,
    splits: u32,
    persistent: bool,
    section: u32,
    tiles: usize,
    slots: usize,
    steps: impl FnOnce() -> Result<TileSteps, AttentionError>,
    opts: &AttentionOptions,
) -> Result<Option<super::splits::TailSplit>, AttentionError> {
    let asked = opts.tail_asked();
    if opts.tail_split == Some(false) {
        return if opts.tail.is_some() {
            Err(AttentionError::Config(ConfigError::TailSplit(
                "a split tail was named with the split tail off".into(),
            )))
        } else {
            Ok(None)
        };
    }
    let eligible = splits == 1
        && !persistent
        && section <= 1
        && !kernel.geometry().shared_kv()
        && kernel.mask() != MaskMode::Documents;
    if !eligible {
        return if asked {
            Err(AttentionError::Config(ConfigError::TailSplit(format!(
                "the split tail runs on the plain one-tile grid, not with {}",
                tail_conflicts(kernel, splits, persistent, section).join(", ")
            ))))
        } else {
            Ok(None)
        };
    }
    if let Some(tail) = opts.tail {
        tail.check(tiles)?;
        return Ok(Some(tail));
    }
    // A call that names its split count gets that plan, without a tail it did not ask for.
    if !asked
        && (opts.splits.is_some()
            || !tail_by_default(kernel)
            || !super::splits::tail_weighed(tiles, slots))
    {
        return Ok(None);
    }
    let planned = super::splits::plan_tail(&steps()?, slots, asked);
    match planned {
        None if asked => Err(AttentionError::Config(ConfigError::TailSplit(format!(
            "no split tail for {tiles} work tiles on {slots} SM slots (tail tiles too short \
             to split)"
        )))),
        _ => Ok(planned),
    }
}

/// What keeps a call off the plain one-tile grid the split tail runs on, one phrase each.
fn tail_conflicts(
    kernel: &AttentionKernel,
    splits: u32,
    persistent: bool,
    section: u32,
) -> Vec<String> {
    let g = kernel.geometry();
    [
        (splits != 1).then(|| format!("{splits} splits")),
        persistent.then(|| "persistent CTAs".to_string()),
        (section > 1).then(|| format!("launch-order sections of {section} planes")),
        g.shared_kv().then(|| format!("the {} tile", g.name())),
        (kernel.mask() == MaskMode::Documents).then(|| "the documents grid".to_string()),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The kernels that take the split tail by default (where [`super::splits::plan_tail`]
/// estimates a gain): head dim 64's 192x128 tile, whose last wave measured faster split
/// (an H200, one binary, 4 interleaved pairs: no mask S = 16384 0.975 of the plain grid's
/// time). Not the tensor-bound tiles of head dims 128 and 256, whose partly idle last wave
/// runs at higher clocks under the power cap: their estimated 2% measured 1.003 and 1.009
/// (bench/results/session-2026-11-28i/tailsplit/).
pub fn tail_by_default(kernel: &AttentionKernel) -> bool {
    kernel.geometry() == Geometry::TILE_192X128
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
    if opts.tail_asked() {
        return Ok(1); // the split tail runs in the plain order
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

#[cfg(test)]
mod tests {
    use fragmask_kernels::attention::{AttentionParams, WINDOW_INFINITE};
    use fragmask_masks::DenseMask;

    use super::*;
    use crate::attention::blockmask::pack_for_kernel;
    use crate::attention::persistent::{tile_steps, window_steps};

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
        assert_eq!(pick(&tile, 1, &def, 0.5).unwrap(), shared);
        assert_eq!(
            pick(&tile, 1, &def, SHARED_KV_MAX_LOAD_RATIO).unwrap(),
            shared
        );
        assert_eq!(pick(&tile, 1, &def, 0.6).unwrap(), None);
        assert_eq!(pick(&tile, 1, &def, 0.88).unwrap(), None);
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
        // An asked-for split tail keeps the one-block tile it runs on.
        let tail = AttentionOptions {
            tail_split: Some(true),
            ..def
        };
        assert_eq!(pick(&tile, 1, &tail, 0.5).unwrap(), None);
        let wide = AttentionKernel::default_for(128, MaskMode::Blocks).unwrap();
        assert_eq!(pick(&wide, 1, &def, 0.5).unwrap(), None);
        // Head dim 64: the one-block tile by default, whatever the pairs load; on if asked.
        let d64 = AttentionKernel::default_for_geometry(Geometry::TILE_64X64, 64, MaskMode::Blocks)
            .unwrap();
        assert_eq!(pick(&d64, 1, &def, 0.5).unwrap(), None);
        let asked = AttentionOptions {
            shared_kv: Some(true),
            ..def
        };
        assert_eq!(pick(&d64, 1, &asked, 0.9).unwrap(), shared);
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
    fn the_split_tail_by_default_on_head_dim_64_only_and_where_asked_or_named() {
        use super::super::splits::TailSplit;
        let def = AttentionOptions::default();
        let k = |d, mode| AttentionKernel::default_for(d, mode).unwrap();
        let uniform = |m_blocks| {
            move || {
                Ok(TileSteps::PerRowBlock {
                    steps: vec![128; m_blocks],
                    planes: 16,
                })
            }
        };
        let tail = |tiles, splits| Some(TailSplit { tiles, splits });
        // S = 16384, H = 16: head dim 64's 1376 tiles get 56 split in two; head dim 128's
        // 2048 none by default (estimated 2%), its estimate's 68 thirds when asked.
        let d64 = k(64, MaskMode::Window);
        let run = |kernel: &AttentionKernel, tiles, m_blocks, o: &AttentionOptions| {
            forward_tail(kernel, 1, false, 1, tiles, 132, uniform(m_blocks), o)
        };
        assert_eq!(run(&d64, 1376, 86, &def).unwrap(), tail(56, 2));
        let d128 = k(128, MaskMode::Window);
        assert_eq!(run(&d128, 2048, 128, &def).unwrap(), None);
        let on = AttentionOptions {
            tail_split: Some(true),
            ..def
        };
        assert_eq!(run(&d128, 2048, 128, &on).unwrap(), tail(68, 3));
        // Named: taken as named (checked against the tiles); off: none.
        let named = AttentionOptions {
            tail: tail(5, 2),
            ..def
        };
        assert_eq!(run(&d128, 2048, 128, &named).unwrap(), tail(5, 2));
        let too_many = AttentionOptions {
            tail: tail(5000, 2),
            ..def
        };
        assert!(run(&d128, 2048, 128, &too_many).is_err());
        let off = AttentionOptions {
            tail_split: Some(false),
            ..def
        };
        assert_eq!(run(&d64, 1376, 86, &off).unwrap(), None);
        assert!(run(
            &d64,
            1376,
            86,
            &AttentionOptions {
                tail: tail(5, 2),
                ..off
            }
        )
        .is_err());
        // A named split count, split-KV, persistent CTAs, sections, documents: no default
        // tail, and an error where one is asked for.
        let splits = AttentionOptions {
            splits: Some(1),
            ..def
        };
        assert_eq!(run(&d64, 1376, 86, &splits).unwrap(), None);
        // (splits, persistent CTAs, launch-order section planes) of a head-dim-64 call.
        let d64_with = |splits, persistent, section, o: &AttentionOptions| {
            forward_tail(&d64, splits, persistent, section, 1376, 132, uniform(86), o)
        };
        // The error names what conflicts, and only that.
        let conflicts = [
            ((2, false, 1), "2 splits"),
            ((1, true, 1), "persistent CTAs"),
            ((1, false, 4), "launch-order sections of 4 planes"),
        ];
        for ((splits, persistent, section), named) in conflicts {
            assert_eq!(d64_with(splits, persistent, section, &def).unwrap(), None);
            let err = d64_with(splits, persistent, section, &on)
                .unwrap_err()
                .to_string();
            assert!(err.ends_with(&format!("not with {named}")), "{err}");
        }
        let docs = k(128, MaskMode::Documents);
        let err = forward_tail(&docs, 1, false, 1, 2048, 132, uniform(128), &on).unwrap_err();
        assert!(
            err.to_string().ends_with("not with the documents grid"),
            "{err}"
        );
        // Whole waves (66 x 16 = 8 x 132 tiles): nothing to gain by default; asked for,
        // the last wave split.
        assert_eq!(run(&d64, 1056, 66, &def).unwrap(), None);
        assert_eq!(run(&d128, 1056, 66, &on).unwrap(), tail(132, 2));
        // Tail tiles too short to split (3 steps): an error when asked.
        let short = || {
            Ok(TileSteps::PerRowBlock {
                steps: vec![3; 86],
                planes: 16,
            })
        };
        assert!(forward_tail(&d64, 1, false, 1, 1376, 132, short, &on).is_err());
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
        // A call asking for the split tail keeps the one-tile grid it runs on.
        let long = window(16384, 1024, 0, g);
        let tail = AttentionOptions {
            tail_split: Some(true),
            ..opts
        };
        assert!(!forward_persistent(&k128, 1, Some(&long), 132, 1, &tail).unwrap());
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
        // A call asking for the split tail keeps the plain order it runs in, unless it
        // names sections too.
        let tail = AttentionOptions {
            tail_split: Some(true),
            ..opts
        };
        assert_eq!(section(16, 16, 4096, 128, inf, 0, &tail).1.unwrap(), 1);
        let both = AttentionOptions {
            head_section: Some(8),
            ..tail
        };
        assert_eq!(section(16, 16, 4096, 128, inf, 0, &both).1.unwrap(), 8);
    }

    #[test]
    fn a_documents_mask_runs_the_documents_grid_unless_the_call_splits_or_asks_for_a_tail() {
        let s = 256;
        let causal: Vec<u8> = (0..s * s).map(|i| u8::from(i % s <= i / s)).collect();
        let dense = DenseMask::new(&causal, &[s, s]).unwrap();
        let mut m = pack_for_kernel(&dense, &Geometry::TILE_128X128).unwrap();
        let docs =
            fragmask_masks::Documents::new(fragmask_masks::DocumentKind::Causal, vec![0, 256]);
        m.attach_documents(docs.unwrap()).unwrap();
        let shape = AttentionShape {
            batch: 1,
            heads: 2,
            kv_heads: 2,
            seqlen_q: s,
            seqlen_k: s,
            head_dim: 128,
        };
        let mode = |opts: AttentionOptions| forward_mode(&shape, Some(&m), &opts);
        let def = AttentionOptions::default();
        assert_eq!(mode(def), MaskMode::Documents);
        assert_eq!(
            mode(AttentionOptions {
                splits: Some(2),
                ..def
            }),
            MaskMode::Blocks
        );
        let tail = AttentionOptions {
            tail_split: Some(true),
            ..def
        };
        assert_eq!(mode(tail), MaskMode::Blocks);
        assert_eq!(forward_mode(&shape, None, &tail), MaskMode::Window);
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

    #[test]
    fn lists_are_dense_only_where_every_tile_is_partial_and_off_the_shared_tile() {
        // A 256 x 256 token mask with every 128 x 128 tile partial, then one tile full.
        let mut bytes: Vec<u8> = (0..256 * 256)
            .map(|i| ((i * 7919) % 3 == 0) as u8)
            .collect();
        let k128 = AttentionKernel::default_for(128, MaskMode::Blocks).unwrap();
        let dense = DenseMask::new(&bytes, &[256, 256]).unwrap();
        let m = pack_for_kernel(&dense, &Geometry::TILE_128X128).unwrap();
        let dense_lists = |k: &AttentionKernel, mode, m: &PackedMask| {
            list_entries(k, mode, m, 0) == ListEntries::Dense
        };
        assert!(dense_lists(&k128, MaskMode::Blocks, &m));
        assert!(!dense_lists(&k128, MaskMode::Documents, &m));
        // The host's dense lists need no count; lists with one check it at run time.
        assert_eq!(
            list_entries(&k128, MaskMode::Blocks, &m, 64),
            ListEntries::Dense
        );
        let shared = AttentionKernel::default_for_geometry(
            Geometry::TILE_64X64_SHARED,
            128,
            MaskMode::Blocks,
        )
        .unwrap();
        let m64 = pack_for_kernel(&dense, &Geometry::TILE_64X64).unwrap();
        assert!(!dense_lists(&shared, MaskMode::Blocks, &m64));
        assert_eq!(
            list_entries(&shared, MaskMode::Blocks, &m64, 64),
            ListEntries::Read
        );
        for q in 0..128 {
            bytes[q * 256..q * 256 + 128].fill(1);
        }
        let dense = DenseMask::new(&bytes, &[256, 256]).unwrap();
        let m = pack_for_kernel(&dense, &Geometry::TILE_128X128).unwrap();
        assert!(!dense_lists(&k128, MaskMode::Blocks, &m));
        assert_eq!(
            list_entries(&k128, MaskMode::Blocks, &m, 0),
            ListEntries::Read
        );
        // The run-time check where it paid: head dims 64 and 256, not 128.
        assert_eq!(
            list_entries(&k128, MaskMode::Blocks, &m, 64),
            ListEntries::Read
        );
        // Keys 128.. masked for every query: an empty tile at every tile width.
        for q in 0..256 {
            bytes[q * 256 + 128..q * 256 + 256].fill(0);
        }
        let sparse = DenseMask::new(&bytes, &[256, 256]).unwrap();
        for d in RUN_TIME_DENSITY_HEAD_DIMS {
            let k = AttentionKernel::default_for(d, MaskMode::Blocks).unwrap();
            let m = pack_for_kernel(&sparse, &k.geometry()).unwrap();
            assert_eq!(
                list_entries(&k, MaskMode::Blocks, &m, 64),
                ListEntries::DenseAtRunTime
            );
            assert_eq!(list_entries(&k, MaskMode::Blocks, &m, 0), ListEntries::Read);
            assert_eq!(
                list_entries(&k, MaskMode::Window, &m, 64),
                ListEntries::Read
            );
        }
        for entries in [ListEntries::Dense, ListEntries::DenseAtRunTime] {
            assert!(k128.with_list_entries(entries).is_ok());
            assert!(shared.with_list_entries(entries).is_err());
            assert!(AttentionKernel::default_for(128, MaskMode::Window)
                .unwrap()
                .with_list_entries(entries)
                .is_err());
        }
    }
}
