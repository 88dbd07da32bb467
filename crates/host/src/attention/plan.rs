//! A forward planned once and run many times ([`AttentionPlan`]).
//!
//! Planning does every check (shapes, strides, the mask's tile and fit, the window and
//! scale), the kernel choice, the split plan, the workspace sizes, the three TMA
//! descriptors and the parameter block. Running a plan copies them, patches the
//! addresses of the call (`cuTensorMapReplaceAddress`, CUDA driver API, "Tensor Map
//! Object Management"; the parameter block's pointer fields) and launches: no
//! allocation, no synchronisation, no mask scan, so a run can be captured in a CUDA
//! graph and shared by every layer whose shapes and mask are the plan's.

use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream};
use fragmask_kernels::attention::{
    AttentionKernel, Geometry, ListEntries, MaskMode, WINDOW_INFINITE,
};
use fragmask_masks::{DocumentKind, PackedMask};

use crate::launch::Launch;

use super::{
    base_params, blocks_params, choice, documents, driver, encode_strided_map, enqueue_forward,
    persistent, shared_kv, splits, strides, window_params, AttentionError, AttentionOptions,
    AttentionRunner, AttentionShape, Params, RawMask, RawTensor, TensorMapArg,
};

/// The address a plan's tensor maps are encoded with before a run patches in the call's
/// (16-byte aligned, never dereferenced: the driver only records it).
const PLACEHOLDER_ADDRESS: u64 = 1 << 20;

/// A forward launch resolved once: kernel, split count, grid, tensor maps and
/// parameters. [`AttentionPlan::run`] patches the tensors' addresses and launches.
#[derive(Clone)]
pub struct AttentionPlan {
    func: CudaFunction,
    combine: Option<(CudaFunction, u32)>,
    maps: [TensorMapArg; 3],
    params: Params,
    launch: Launch,
    /// The kernel configuration it launches.
    pub kernel: AttentionKernel,
    /// Shapes of the call.
    pub shape: AttentionShape,
    /// Split-KV splits of each row block (1: none; the split tail's are in `tail`).
    pub splits: u32,
    /// The split tail (docs/architecture.md, "Split tail"), if the plan runs one.
    pub tail: Option<splits::TailSplit>,
    /// Floats of the partial o and lse a split run needs (0, 0 without splits).
    pub workspace_floats: (usize, usize),
    /// The documents grid's work-item table (`AttentionParams::doc_items`), uploaded
    /// once at planning and shared by the plan's clones.
    doc_items: Option<Arc<CudaSlice<i32>>>,
    /// Persistent CTAs' work table (`AttentionParams::work`), uploaded once at planning.
    work: Option<Arc<CudaSlice<i32>>>,
    /// The shared-K/V tile's pairs and steps (`AttentionParams::pair_steps`), uploaded
    /// once at planning.
    pair_steps: Option<Arc<CudaSlice<i32>>>,
    /// The tile lists' row order (`AttentionParams::row_order`) where it was computed from
    /// host lists and uploaded at planning: kept while the parameters point at it.
    _row_order: Option<Arc<CudaSlice<i32>>>,
}

impl std::fmt::Debug for AttentionPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttentionPlan")
            .field("kernel", &self.kernel)
            .field("shape", &self.shape)
            .field("splits", &self.splits)
            .field("tail", &self.tail)
            .field("workspace_floats", &self.workspace_floats)
            .finish_non_exhaustive()
    }
}

/// The addresses of one run of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanPointers {
    /// q, k, v: element `[0, 0, 0, 0]` of tensors with the plan's shapes and strides.
    pub q: u64,
    /// See `q`.
    pub k: u64,
    /// See `q`.
    pub v: u64,
    /// `[B, H, Sq, D]` output in the plan's `AttentionOptions::out_strides` (contiguous by
    /// default; 16-byte aligned).
    pub o: u64,
    /// Contiguous f32 `[B, H, Sq]` (4-byte aligned).
    pub lse: u64,
    /// Split-KV workspace: partial o and lse of at least
    /// [`AttentionPlan::workspace_floats`] floats (0 without splits).
    pub ws_o: u64,
    /// See `ws_o`.
    pub ws_lse: u64,
}

impl AttentionRunner {
    /// Plans a forward over tensors with the shapes and strides of `q`, `k`, `v` (their
    /// `ptr` fields are not read: each run brings its own). `opts.splits` None asks the
    /// planner ([`splits::plan_splits`]); the kernel is compiled here if it was not yet.
    pub fn plan(
        &self,
        q: &RawTensor,
        k: &RawTensor,
        v: &RawTensor,
        mask: &RawMask<'_>,
        opts: &AttentionOptions,
    ) -> Result<AttentionPlan, AttentionError> {
        let shape = AttentionShape::from_tensors(q.shape, k.shape, v.shape)?;
        let host_mask = match mask {
            RawMask::Window(_) => None,
            RawMask::Blocks(host, _) => Some(*host),
        };
        let mode = choice::forward_mode(&shape, host_mask, opts);
        if let Some(scale) = opts.scale {
            if !scale.is_finite() || scale <= 0.0 {
                return Err(AttentionError::Shape(format!(
                    "scale {scale} must be positive and finite"
                )));
            }
        }
        if let Some(st) = opts.out_strides {
            strides::check_output_strides("o", shape.q_shape(), st)?;
        }
        let kernel = choice::call_kernel(shape.head_dim, mode, host_mask, opts)?;
        // The 64-token tile's query blocks may share their K/V loads (choice::shared_kv):
        // the pairs' table is built to weigh that, and kept for the upload below.
        let mut shared_table = None;
        let kernel = match host_mask {
            Some(host) if mode == MaskMode::Blocks && !kernel.geometry().shared_kv() => {
                let splits = match opts.splits {
                    Some(n) => n,
                    None if kernel.geometry() == Geometry::TILE_64X64 => {
                        self.planned_splits(&kernel, &shape, host_mask, opts)?
                    }
                    None => 1,
                };
                let mut built = None;
                let chosen = choice::shared_kv(&kernel, splits, opts, || {
                    let table = shared_kv::table(host, &Geometry::TILE_64X64_SHARED);
                    let ratio = table.as_ref().map_or(f64::INFINITY, |t| t.load_ratio());
                    built = table.ok();
                    ratio
                })?;
                match chosen {
                    Some(k) => {
                        shared_table = built;
                        k
                    }
                    None => kernel,
                }
            }
            _ => kernel,
        };
        // Lists that hold every block of every row as partial, in order, need not be read
        // (docs/masks.md, "Dense tile lists"); lists built on the GPU say so by their count.
        let kernel = match mask {
            RawMask::Blocks(host, lists) => kernel
                .with_list_entries(choice::list_entries(
                    &kernel,
                    mode,
                    host,
                    lists.partial_count,
                ))
                .map_err(AttentionError::Config)?,
            RawMask::Window(_) => kernel,
        };
        let (g, dt) = (kernel.geometry(), kernel.dtype());
        // Q boxes of the block's rows (of each query block's 64 on the shared-K/V tile).
        let q_box = g.mask_geometry().block_m();
        let maps = [
            encode_strided_map(PLACEHOLDER_ADDRESS, q.shape, q.strides, q_box, dt)?,
            encode_strided_map(PLACEHOLDER_ADDRESS, k.shape, k.strides, g.block_n(), dt)?,
            encode_strided_map(PLACEHOLDER_ADDRESS, v.shape, v.strides, g.block_n(), dt)?,
        ];
        let mut params = base_params(&shape, &kernel, opts, 0, 0);
        let mut doc_items = None;
        let mut pair_steps = None;
        match mask {
            RawMask::Window(w) => window_params(&mut params, w),
            RawMask::Blocks(host, lists) => {
                blocks_params(&mut params, host, *lists, &shape)?;
                if kernel.list_entries() == ListEntries::DenseAtRunTime {
                    (params.lists_partial_count, params.lists_tiles) =
                        super::lists_count(host.lists(), lists.partial_count)?;
                }
                if mode == MaskMode::Documents {
                    doc_items = Some(self.documents_params(&mut params, host, &kernel)?);
                }
                if g.shared_kv() && opts.mask_on_device_only {
                    return Err(AttentionError::Config(
                        fragmask_kernels::attention::ConfigError::SharedKv(format!(
                            "the {} tile builds its step table from the mask's host lists, \
                             which a mask left on the device does not have (read it back \
                             first: Python's Mask.to(\"cpu\"))",
                            g.name()
                        )),
                    ));
                }
                if g.shared_kv() {
                    let table = match shared_table.take() {
                        Some(t) => t,
                        None => shared_kv::table(host, &g)?,
                    };
                    pair_steps = Some(self.shared_kv_params(&mut params, host, &table)?);
                }
            }
        }
        if g.shared_kv() && pair_steps.is_none() {
            return Err(AttentionError::Shape(format!(
                "the {} tile runs tile lists only",
                g.name()
            )));
        }
        if g.shared_kv() && (opts.splits.is_some_and(|n| n > 1) || opts.persistent == Some(true)) {
            return Err(AttentionError::Config(
                fragmask_kernels::attention::ConfigError::SharedKv(format!(
                    "the {} tile runs one split on the one-tile grid",
                    g.name()
                )),
            ));
        }
        // Persistent CTAs asked for: one split unless the call names a count.
        let n = match mode {
            MaskMode::Documents => 1,
            _ if g.shared_kv() => 1,
            _ if opts.persistent == Some(true) && opts.splits.is_none() => 1,
            _ => self.planned_splits(&kernel, &shape, host_mask, opts)?,
        };
        let launch = splits::SplitLaunch::new(&shape, n, params.m_blocks as u32)?;
        params.num_splits = n as i32;
        // Persistent CTAs (choice::forward_persistent): the work table, uploaded once.
        let g = kernel.geometry();
        let sm_slots = self.sm_count()?.saturating_mul(g.ctas_per_sm() as usize);
        let slots = match opts.persistent_ctas {
            Some(0) => {
                return Err(AttentionError::Shape(
                    "persistent CTAs: the CTA count must be at least 1".into(),
                ))
            }
            Some(n) => sm_slots.min(n as usize),
            None => sm_slots,
        };
        // The launch order (choice::head_section): a causal walk's sections where they end
        // the launch earlier.
        let section = choice::head_section(&shape, &kernel, &params, n, sm_slots, opts)?;
        params.head_section = i32::try_from(section).unwrap_or(i32::MAX);
        let planes = shape
            .heads
            .checked_mul(shape.batch)
            .ok_or_else(|| AttentionError::Shape("heads x batch overflows".into()))?;
        let candidate = match opts.persistent {
            Some(on) => on,
            None => n == 1 && choice::persistent_by_default(&kernel) && !g.shared_kv(),
        };
        // Each work tile's key steps (the persistent table's weights, the split tail's
        // estimate): the mask's lists, or every key block where they are on the device only
        // (the host holds a placeholder with no tile).
        let work_steps = || match kernel.mask() {
            MaskMode::Blocks if opts.mask_on_device_only => {
                Ok(persistent::every_key_block_steps(&params, &g, planes))
            }
            mode => persistent::tile_steps(&params, mode, host_mask, &g, planes),
        };
        let steps = if candidate { Some(work_steps()?) } else { None };
        let persistent =
            choice::forward_persistent(&kernel, n, steps.as_ref(), slots, section, opts)?;
        // The split tail (choice::forward_tail): the plain grid's last wave cut into splits.
        let tiles = (params.m_blocks.max(0) as usize)
            .checked_mul(planes)
            .ok_or_else(|| AttentionError::Shape("work tiles overflow".into()))?;
        let tail = choice::forward_tail(
            &kernel,
            n,
            persistent,
            section,
            tiles,
            sm_slots,
            || match steps {
                Some(ref s) => Ok(s.clone()),
                None => work_steps(),
            },
            opts,
        )?;
        // A call that asks for the row order (and not for the tail) runs the one-tile grid.
        let tail = tail.filter(|_| opts.tile_order != Some(true) || opts.tail_asked());
        let launch = match tail {
            Some(t) => {
                params.num_splits = t.splits as i32;
                params.tail_tiles = t.tiles as i32;
                splits::SplitLaunch::tail(t, tiles, g.block_m(), shape.head_dim)?
            }
            None => launch,
        };
        let workspace_floats = match launch.combine_grid {
            Some(_) => launch.workspace_len(&shape)?,
            None => (0, 0),
        };
        // O through its strides only where they are not contiguous [B, H, Sq, D]: the
        // strided epilogue costs short calls (AttentionKernel::with_strided_o).
        let strided_o = opts
            .out_strides
            .is_some_and(|st| st != strides::contiguous_strides(shape.q_shape()));
        // Split-KV support is compiled in only where the call has several splits.
        let kernel = kernel
            .with_split_kv(n > 1 || tail.is_some())
            .with_strided_o(strided_o)
            .with_persistent(persistent)
            .and_then(|k| k.with_tail_split(tail.is_some()))
            .map_err(AttentionError::Config)?;
        let mut work = None;
        let grid = match (persistent, &steps) {
            (true, Some(steps)) => {
                let (table, ctas) =
                    self.work_params(&mut params, steps, slots, section as usize)?;
                work = Some(table);
                (ctas, 1, 1)
            }
            (true, None) => {
                return Err(AttentionError::Shape(
                    "persistent CTAs without their work tiles' steps".into(),
                ))
            }
            _ if tail.is_some() => (launch.grid_x, 1, 1),
            _ => (launch.grid_x, shape.heads as u32, shape.batch as u32),
        };
        // The tile lists' row blocks largest first, on the one-tile grid only (persistent CTAs
        // and the split tail have their own order; the shared-K/V tile walks pairs).
        let mut row_order = None;
        if let RawMask::Blocks(host, lists) = mask {
            let grid_rows = mode == MaskMode::Blocks
                && !g.shared_kv()
                && !persistent
                && tail.is_none()
                && opts.tile_order != Some(false);
            // Lists built on the GPU, or left there, have only a stand-in on the host.
            let host_lists = lists.partial_count == 0 && !opts.mask_on_device_only;
            let order = match grid_rows {
                true => self.dispatch_order(
                    lists.tile_order,
                    || host_lists.then(|| host.row_order()),
                    |order| host.is_grid_row_order(order),
                    opts.tile_order == Some(true),
                )?,
                false => None,
            };
            if let Some(order) = order {
                params.row_order = order.address;
                row_order = order.uploaded;
            }
        }
        if opts.tile_order == Some(true) && params.row_order == 0 {
            return Err(AttentionError::Config(
                fragmask_kernels::attention::ConfigError::Layout(
                    "the largest-first row order needs a mask's tile lists on the one-tile \
                     grid (not the documents grid, the shared-K/V tile, persistent CTAs or \
                     the split tail), with the order on the device (the GPU packer's) or the \
                     lists on the host"
                        .into(),
                ),
            ));
        }
        let (func, combine) = self.functions(&kernel)?;
        Ok(AttentionPlan {
            func,
            combine: launch.combine_grid.map(|grid| (combine, grid)),
            maps,
            params: Params(params),
            launch: Launch::new(grid, kernel.threads()).smem(kernel.smem_bytes()),
            kernel,
            shape,
            splits: n,
            tail,
            workspace_floats,
            doc_items,
            work,
            pair_steps,
            _row_order: row_order,
        })
    }

    /// The shared-K/V tile's pairs of query blocks and their union walks
    /// ([`shared_kv::table`]), uploaded here once and synchronised so a run on any stream
    /// reads it. The headers are rows of the mask's `[Bm, Hm, Mb]` (64-row blocks), so the
    /// list strides are set in those rows; `m_blocks` (the grid's x) stays the pairs.
    fn shared_kv_params(
        &self,
        params: &mut super::AttentionParams,
        host: &PackedMask,
        table: &shared_kv::PairTable,
    ) -> Result<Arc<CudaSlice<i32>>, AttentionError> {
        let (h, mb) = (host.shape(), host.grid().m_blocks);
        let mb =
            i32::try_from(mb).map_err(|_| AttentionError::Shape("too many query blocks".into()))?;
        params.mask_head_stride = if h.heads > 1 { mb } else { 0 };
        params.mask_batch_stride = if h.batch > 1 {
            mb.checked_mul(h.heads as i32)
                .ok_or_else(|| AttentionError::Shape("mask rows overflow".into()))?
        } else {
            0
        };
        let (table, ptr) = self.upload_table(&table.ints, "uploading the shared-K/V step table")?;
        params.pair_steps = ptr;
        Ok(table)
    }

    /// The work table of a persistent launch over the work tiles of `steps`
    /// ([`persistent::work_table`], on `slots` SM slots, dealt in the launch order of
    /// `section` planes per section), uploaded here once and
    /// synchronised so a run on any stream reads it; returns it with the CTA count.
    fn work_params(
        &self,
        params: &mut super::AttentionParams,
        steps: &persistent::TileSteps,
        slots: usize,
        section: usize,
    ) -> Result<(Arc<CudaSlice<i32>>, u32), AttentionError> {
        let tiles = persistent::tile_count(steps.len(), 1, 1)?;
        let ctas = persistent::cta_count(tiles, slots);
        let table = persistent::work_table(steps, ctas, section)?;
        let ctas = u32::try_from(ctas)
            .map_err(|_| AttentionError::Shape("too many persistent CTAs".into()))?;
        let (table, ptr) =
            self.upload_table(&table, "uploading the persistent CTAs' work table")?;
        params.work = ptr;
        Ok((table, ctas))
    }

    /// The documents grid of `host` (which has documents, [`choice::forward_mode`]): the
    /// window of its kind, the work-item count as `m_blocks` (the grid's x extent) and
    /// the work-item table, uploaded here once and synchronised so a run on any stream
    /// reads it.
    fn documents_params(
        &self,
        params: &mut super::AttentionParams,
        host: &PackedMask,
        kernel: &AttentionKernel,
    ) -> Result<Arc<CudaSlice<i32>>, AttentionError> {
        let docs = host.documents().ok_or_else(|| {
            AttentionError::Mask("the documents grid needs a mask with documents".into())
        })?;
        let items = documents::work_items(docs, &kernel.geometry());
        params.m_blocks = i32::try_from(items.len())
            .map_err(|_| AttentionError::Shape("too many document row blocks".into()))?;
        params.window_left = WINDOW_INFINITE;
        params.window_right = match docs.kind() {
            DocumentKind::Causal => 0,
            DocumentKind::Full => WINDOW_INFINITE,
        };
        params.diag_offset = 0;
        let (table, ptr) = self.upload_table(
            &documents::item_table(&items),
            "uploading the documents grid's work items",
        )?;
        params.doc_items = ptr;
        Ok(table)
    }
}

/// Replaces the global address of a copy of a plan's tensor map.
fn patch(map: &mut TensorMapArg, address: u64) -> Result<(), AttentionError> {
    // SAFETY: `map` is a valid, initialised 64-byte-aligned CUtensorMap (encoded by
    // `plan`); the driver rewrites its address field in host memory only.
    unsafe { sys::cuTensorMapReplaceAddress(&mut map.0, address as *mut std::ffi::c_void) }
        .result()
        .map_err(driver("patching a tensor map (cuTensorMapReplaceAddress)"))
}

/// A plan's tensor maps and parameters at one call's addresses ([`AttentionPlan::bind`]).
#[derive(Clone, Copy)]
pub(crate) struct BoundRun {
    maps: [TensorMapArg; 3],
    params: Params,
}

impl AttentionPlan {
    /// Whether the plan runs persistent CTAs (its work table was uploaded at planning).
    pub fn persistent(&self) -> bool {
        self.work.is_some()
    }

    /// Whether the plan runs the shared-K/V tile (its pairs' step table was uploaded at
    /// planning).
    pub fn shared_kv(&self) -> bool {
        self.pair_steps.is_some()
    }

    /// Whether the plan runs the tile lists' row blocks largest first
    /// ([`AttentionOptions::tile_order`]).
    pub fn largest_first(&self) -> bool {
        self.params.0.row_order != 0
    }

    /// Whether the plan runs the documents grid ([`MaskMode::Documents`]; its work-item
    /// table was uploaded at planning).
    pub fn documents_grid(&self) -> bool {
        self.doc_items.is_some()
    }

    /// Launches the planned forward on `stream` at `ptrs` (and the split-KV combine after
    /// it). Checks the alignments TMA and the kernel need; nothing else is re-planned.
    ///
    /// # Safety
    /// q, k and v must be live device tensors of this context with the plan's shapes and
    /// strides, o an output of the plan's shape in its out strides and lse a contiguous
    /// one, overlapping nothing else, the workspace at least [`Self::workspace_floats`] floats when
    /// [`Self::splits`] > 1 and used by no launch in flight on another stream, and a
    /// mask's lists (fixed at planning) still alive, all valid until the launches
    /// complete on `stream`.
    pub unsafe fn run(
        &self,
        stream: &Arc<CudaStream>,
        ptrs: &PlanPointers,
    ) -> Result<(), AttentionError> {
        let bound = self.bind(ptrs)?;
        // SAFETY: this function's contract.
        unsafe { self.enqueue(stream, &bound) }
    }

    /// The plan's tensor maps and parameters at `ptrs`, after checking the alignments
    /// TMA and the kernel need.
    pub(crate) fn bind(&self, ptrs: &PlanPointers) -> Result<BoundRun, AttentionError> {
        if [ptrs.q, ptrs.k, ptrs.v, ptrs.o]
            .iter()
            .any(|p| p % 16 != 0 || *p == 0)
            || ptrs.lse % 4 != 0
            || ptrs.lse == 0
        {
            return Err(AttentionError::Shape(format!(
                "q, k, v and o must be non-null and 16-byte aligned, lse 4-byte aligned; got \
                 {:#x}, {:#x}, {:#x}, {:#x}, {:#x}",
                ptrs.q, ptrs.k, ptrs.v, ptrs.o, ptrs.lse
            )));
        }
        let mut maps = self.maps;
        patch(&mut maps[0], ptrs.q)?;
        patch(&mut maps[1], ptrs.k)?;
        patch(&mut maps[2], ptrs.v)?;
        let mut params = self.params;
        params.0.o = ptrs.o;
        params.0.lse = ptrs.lse;
        if self.combine.is_some() {
            if ptrs.ws_o % 16 != 0 || ptrs.ws_lse % 4 != 0 || ptrs.ws_o == 0 || ptrs.ws_lse == 0 {
                return Err(AttentionError::Shape(format!(
                    "the split-KV workspace must be non-null, o 16-byte and lse 4-byte \
                     aligned, got {:#x} and {:#x}",
                    ptrs.ws_o, ptrs.ws_lse
                )));
            }
            params.0.ws_o = ptrs.ws_o;
            params.0.ws_lse = ptrs.ws_lse;
        }
        Ok(BoundRun { maps, params })
    }

    /// Enqueues the forward (and the combine) of `bound`, a binding of this plan.
    ///
    /// # Safety
    /// The addresses `bound` was made with must satisfy [`Self::run`]'s contract.
    pub(crate) unsafe fn enqueue(
        &self,
        stream: &Arc<CudaStream>,
        bound: &BoundRun,
    ) -> Result<(), AttentionError> {
        // SAFETY: the plan's function, maps and parameters belong together (checked
        // against the shapes at planning); the addresses are this function's contract.
        unsafe {
            enqueue_forward(
                stream,
                &self.func,
                self.launch,
                &bound.maps,
                bound.params,
                self.combine.as_ref(),
            )
        }
    }
}
