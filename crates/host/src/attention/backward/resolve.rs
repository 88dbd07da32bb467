//! Resolving a backward call: every check, the kernel choice (documents grid, paired key
//! blocks, group slices), the tensor maps, the parameter block and the tables it points at
//! ([`Resolved`]), which [`AttentionRunner::prepare_backward`], the plans and the raw launch
//! then enqueue.

use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, CudaStream, DeviceRepr};
use fragmask_kernels::attention::backward::{
    BackwardKernel, BackwardMask, BackwardParams, DQ_CHUNK_ROWS, ROWS_PER_BLOCK,
};
use fragmask_kernels::attention::{ConfigError, ListEntries, WINDOW_INFINITE};

use super::super::{
    driver, encode_strided_map, AttentionError, AttentionRunner, AttentionShape, DispatchOrder,
    RawTensor, TensorMapArg,
};
use super::{
    backward_kernel, check_output_strides, check_shape, key_pairs, kv_accum_len, padded_rows,
    transposed_lists, BackwardFunctions, BackwardOptions, BackwardWorkspace, DqReduce, GradStrides,
    RawBackwardMask, RawGradients,
};
use crate::device_lists::RawMaskLists;
use crate::launch::{launch, KernelArg, Launch};
use fragmask_masks::{PackedMask, TransposedLists};

/// The kernel's `fm_bwd_params`, passed by value (the struct generated from
/// [`BackwardParams`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Params(pub(super) BackwardParams);

// SAFETY: BackwardParams is #[repr(C)] plain data (u64 pointers, i64, i32, f32) whose
// offsets and size equal the CUDA struct's: the kernels crate's test compares them with
// C's rules, and the generated source static_asserts the same numbers under NVRTC.
unsafe impl DeviceRepr for Params {}

/// Everything a backward launch needs, resolved: three launches in order.
pub(super) struct Resolved {
    pub(super) functions: BackwardFunctions,
    pub(super) maps: [TensorMapArg; 4],
    pub(super) params: Params,
    pub(super) kernel: BackwardKernel,
    pub(super) shape: AttentionShape,
    /// CTAs of the main kernel along x per column group: the key tiles, or with a dispatch
    /// order every sub-tile of every mask key tile (those past the keys exit), or the
    /// documents grid's work items.
    pub(super) ctas: u32,
    /// The documents grid's work-item table (`BackwardParams::doc_items`), uploaded once
    /// when the call was resolved and kept while the parameters point at it.
    pub(super) doc_items: Option<Arc<CudaSlice<i32>>>,
    /// The paired key blocks' table (`BackwardParams::key_pairs`), likewise.
    pub(super) key_pairs: Option<Arc<CudaSlice<i32>>>,
    /// The key tiles' dispatch order (`BackwardParams::tile_order`) where it was computed
    /// from host-held lists and uploaded when the call was resolved, likewise.
    pub(super) tile_order: Option<Arc<CudaSlice<i32>>>,
    /// The deterministic mode's walk orders (counts, full counts (0), indices and tile
    /// offsets in one table, `fragmask_masks::deterministic_walks`) where they were
    /// uploaded, likewise.
    pub(super) walks: Option<Arc<CudaSlice<i32>>>,
}

impl Resolved {
    /// Enqueues the preprocess, the main kernel and the postprocess on `stream`.
    ///
    /// # Safety
    /// Every address in `params` and the maps must be live for the shape (checked by the
    /// callers' validation), until the kernels complete on `stream`.
    pub(super) unsafe fn launch(&self, stream: &Arc<CudaStream>) -> Result<(), AttentionError> {
        // SAFETY: the caller's contract.
        unsafe { self.launch_stages(stream, [true; 3]) }
    }

    /// Enqueues the kernels `[pre, main, post]` says, in that order (`launch` enqueues
    /// all three).
    ///
    /// # Safety
    /// As [`Self::launch`]; a main kernel run without its preprocess reads a workspace that
    /// an earlier preprocess on `stream` filled for its rows, a postprocess without its main
    /// kernel casts what earlier main kernels reduced there.
    pub(super) unsafe fn launch_stages(
        &self,
        stream: &Arc<CudaStream>,
        [run_pre, run_main, run_post]: [bool; 3],
    ) -> Result<(), AttentionError> {
        let s = &self.shape;
        let rows = padded_rows(s.seqlen_q).unwrap_or(0) as u32;
        let (heads, batch) = (s.heads as u32, s.batch as u32);
        let pre = Launch::new(
            (rows.div_ceil(ROWS_PER_BLOCK), heads, batch),
            32 * ROWS_PER_BLOCK,
        );
        // The main kernel and the postprocess launch under programmatic dependent launch
        // (each waits, griddepcontrol.wait, for the previous kernel's writes before its
        // first read of them): their launch and prologue overlap the previous kernel's tail.
        // Only behind their own call's previous kernel: a main kernel enqueued behind
        // another call's main kernel would hold every SM it frees (its blocks resident,
        // waiting) ahead of a kernel another stream queued meanwhile (the dK/dV transfer
        // of a context-parallel backward, docs/distributed.md).
        // Group slices (BackwardKernel::with_group_slices): x runs each slice's key tiles.
        let slices = self.kernel.group_slices();
        let main = Launch::new(
            (
                self.ctas * self.kernel.grid_split() * slices,
                s.kv_heads as u32,
                batch,
            ),
            self.kernel.threads(),
        )
        .smem(self.kernel.smem_bytes())
        .dependent(run_pre);
        // One warp per key row of the dK/dV accumulators, behind the main kernel.
        let post_kv = Launch::new(
            (
                (s.seqlen_k as u32).div_ceil(ROWS_PER_BLOCK),
                s.kv_heads as u32,
                batch,
            ),
            32 * ROWS_PER_BLOCK,
        )
        .dependent(true);
        let post = match self.kernel.dq_reduce() {
            // One warp per query row of the row-major accumulator.
            DqReduce::Atomics => Launch::new(
                ((s.seqlen_q as u32).div_ceil(ROWS_PER_BLOCK), heads, batch),
                32 * ROWS_PER_BLOCK,
            ),
            // One block of 128 threads per (64-query chunk, 64-column chunk).
            DqReduce::Bulk | DqReduce::FragmentAtomics => Launch::new(
                (
                    rows / DQ_CHUNK_ROWS * (s.head_dim as u32 / 64),
                    heads,
                    batch,
                ),
                128,
            ),
        }
        .dependent(run_main);
        let params = [KernelArg::new(&self.params)];
        // Loaded exactly when the kernel has group slices (`backward_functions`).
        let post_kv_fn = self.functions.post_kv.as_ref();
        if run_main && post_kv_fn.is_some() {
            // The group slices add into the dK and dV accumulators: zero the call's
            // [B, Hkv, Sk, D] of each first (the workspace fits them: checked when resolved).
            let n = kv_accum_len(s)?;
            for ptr in [self.params.0.dk_accum, self.params.0.dv_accum] {
                // SAFETY: `ptr` is a live f32 allocation of the workspace with at least `n`
                // elements (`BackwardWorkspace::fits_kv_accum`), used by this call's kernels
                // only, in stream order.
                unsafe { sys::cuMemsetD32Async(ptr, 0, n, stream.cu_stream()) }
                    .result()
                    .map_err(driver("zeroing the backward's dK/dV accumulators"))?;
            }
        }
        if run_pre {
            // SAFETY: the preprocess takes fm_bwd_params by value; its pointers are live
            // (contract).
            unsafe { launch(stream, &self.functions.pre, pre, &params) }
                .map_err(driver("launching the backward preprocess"))?;
        }
        let [q, k, v, d_o] = &self.maps;
        let main_args = [
            KernelArg::new(q),
            KernelArg::new(k),
            KernelArg::new(v),
            KernelArg::new(d_o),
            KernelArg::new(&self.params),
        ];
        if run_main {
            // SAFETY: four by-value tensor maps and fm_bwd_params, the kernel's signature.
            unsafe { launch(stream, &self.functions.main, main, &main_args) }
                .map_err(driver("launching the backward kernel"))?;
            if let Some(f) = post_kv_fn {
                // SAFETY: as the preprocess (fm_bwd_params by value).
                unsafe { launch(stream, f, post_kv, &params) }
                    .map_err(driver("launching the backward kv postprocess"))?;
            }
        }
        if run_post {
            // SAFETY: as the preprocess (fm_bwd_params by value).
            unsafe { launch(stream, &self.functions.post, post, &params) }
                .map_err(driver("launching the backward postprocess"))?;
        }
        Ok(())
    }
}

impl AttentionRunner {
    /// Validates a call and resolves its launches.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resolve(
        &self,
        q: &RawTensor,
        k: &RawTensor,
        v: &RawTensor,
        o: &RawTensor,
        lse: u64,
        d_o: &RawTensor,
        mask: &RawBackwardMask<'_>,
        opts: &BackwardOptions,
        grads: RawGradients,
        ws: &BackwardWorkspace,
        upload: Upload,
    ) -> Result<Resolved, AttentionError> {
        let shape = AttentionShape::from_tensors(q.shape, k.shape, v.shape)?;
        check_shape("o", o.shape, shape.q_shape())?;
        check_shape("d_o", d_o.shape, shape.q_shape())?;
        for (name, t) in [("o", o), ("d_o", d_o)] {
            if t.strides[3] != 1 || t.ptr % 4 != 0 || t.strides[..3].iter().any(|s| s % 2 != 0) {
                return Err(AttentionError::Shape(format!(
                    "{name} must have a contiguous head dim, even strides and a 4-byte-aligned \
                     address (the preprocess reads element pairs)"
                )));
            }
        }
        if let Some(g) = &opts.grad_strides {
            check_output_strides("dq", shape.q_shape(), g.dq)?;
            check_output_strides("dk and dv", shape.kv_shape(), g.dkv)?;
        }
        if [grads.dq, grads.dk, grads.dv].iter().any(|p| p % 16 != 0) || lse % 4 != 0 {
            return Err(AttentionError::Shape(
                "dq, dk, dv must be 16-byte aligned and lse 4-byte aligned".into(),
            ));
        }
        if !ws.fits(&shape) {
            return Err(AttentionError::Shape(format!(
                "the backward workspace is too small for {shape:?}"
            )));
        }
        let host_mask = match mask {
            RawBackwardMask::Window(_) => None,
            RawBackwardMask::Blocks(m, _, _) => {
                super::super::blockmask::check_fits(m, &shape)?;
                Some(*m)
            }
        };
        let documents = host_mask
            .and_then(|m| super::super::choice::backward_documents(&shape, m, opts))
            .filter(|_| upload == Upload::Allowed);
        let kernel = match documents {
            Some(_) => super::super::choice::backward_config(
                u32::try_from(shape.head_dim).unwrap_or(0),
                BackwardMask::Documents,
                opts,
            )?,
            None => backward_kernel(shape.head_dim, host_mask, opts)?,
        };
        let slices = match (opts.group_slices, mask) {
            (Some(n), _) => n,
            (None, RawBackwardMask::Window(w)) if ws.fits_kv_accum(&shape) => {
                super::super::choice::backward_group_slices(&shape, &kernel, w)
            }
            (None, _) => 1,
        };
        super::super::choice::check_group_slices(&shape, slices)?;
        if slices > 1 && !ws.fits_kv_accum(&shape) {
            return Err(AttentionError::Shape(format!(
                "{slices} GQA group slices add dK and dV into the workspace's f32 accumulators, \
                 which do not hold {shape:?} (a workspace made for a GQA shape with as many keys)"
            )));
        }
        let kernel = kernel
            .with_group_slices(slices)
            .map_err(AttentionError::Config)?;
        // Paired key blocks: their table is uploaded here, so only where uploads are allowed,
        // and built from the host's transposed lists, so only where those have entries (a
        // mask packed on the GPU and not read back has its lists on the device only: it runs
        // unpaired).
        let pair_table = match (host_mask, documents) {
            (Some(m), None)
                if upload == Upload::Allowed
                    && super::super::choice::backward_paired_keys(&shape, m, &kernel, opts)? =>
            {
                // The deterministic mode's walk orders, a plane's pairs one per SM at once.
                let walk = match (kernel.deterministic(), opts.deterministic_walks) {
                    (false, _) | (true, Some(false)) => key_pairs::PairWalks::Ascending,
                    (true, None) => key_pairs::PairWalks::WherePays(self.sm_count()?),
                    (true, Some(true)) => key_pairs::PairWalks::Always(self.sm_count()?),
                };
                Some(key_pairs::key_pair_table(transposed_lists(m)?, walk)?)
                    .filter(|t| t.list_steps > 0)
            }
            _ => None,
        };
        let paired = pair_table.is_some();
        if opts.paired_keys == Some(true) && !paired {
            return Err(AttentionError::Config(ConfigError::Layout(
                "paired key blocks run on a prepared or planned call (not a raw launch: the \
                 table is uploaded) of a mask packed at 64x64 (not the window walk or the \
                 documents grid) whose transposed lists are on the host and not empty (a mask \
                 packed on the GPU has its lists on the device only until they are read back)"
                    .into(),
            )));
        }
        // The gradients through their strides only where they are not contiguous: the
        // strided epilogues cost short calls (BackwardKernel::with_strided_grads).
        let contiguous = GradStrides::contiguous(&shape);
        let grad_strides = opts.grad_strides.unwrap_or(contiguous);
        // Dense lists (docs/masks.md, "Dense tile lists"): both directions hold every tile
        // as partial, in order, so the kernel computes its entries instead of reading them.
        // Transposed lists built on the GPU come with their partial-tile count, which the
        // deterministic kernel checks when it runs.
        let entries = match (mask, documents) {
            (RawBackwardMask::Blocks(m, _, bwd), None) if !paired => {
                super::super::choice::backward_list_entries(
                    m,
                    bwd.partial_count,
                    kernel.deterministic(),
                )
            }
            _ => ListEntries::Read,
        };
        let kernel = kernel
            .with_paired_keys(paired)
            .map_err(AttentionError::Config)?
            .with_list_entries(entries)
            .map_err(AttentionError::Config)?
            .with_strided_grads(grad_strides != contiguous);
        let dt = kernel.dtype();
        let n = kernel.kv_box_rows();
        let maps = [
            encode_strided_map(q.ptr, q.shape, q.strides, kernel.step_m(), dt)?,
            encode_strided_map(k.ptr, k.shape, k.strides, n, dt)?,
            encode_strided_map(v.ptr, v.shape, v.strides, n, dt)?,
            encode_strided_map(d_o.ptr, d_o.shape, d_o.strides, kernel.step_m(), dt)?,
        ];
        let functions = self.backward_functions(&kernel)?;
        let scale = opts.scale.unwrap_or(1.0 / (shape.head_dim as f32).sqrt());
        let [lse_log2, dsum, dq_accum, sem] = ws.device_ptrs(&self.stream);
        let [dk_accum, dv_accum] = ws.kv_accum_ptrs(&self.stream);
        let i64s = |x: usize| x as i64;
        let mut params = BackwardParams {
            o: o.ptr,
            d_o: d_o.ptr,
            lse,
            lse_log2,
            dsum,
            dq_accum,
            sem,
            dk_accum,
            dv_accum,
            dq: grads.dq,
            dk: grads.dk,
            dv: grads.dv,
            o_stride_b: i64s(o.strides[0]),
            o_stride_h: i64s(o.strides[1]),
            o_stride_s: i64s(o.strides[2]),
            do_stride_b: i64s(d_o.strides[0]),
            do_stride_h: i64s(d_o.strides[1]),
            do_stride_s: i64s(d_o.strides[2]),
            dq_stride_b: i64s(grad_strides.dq[0]),
            dq_stride_h: i64s(grad_strides.dq[1]),
            dq_stride_s: i64s(grad_strides.dq[2]),
            dkv_stride_b: i64s(grad_strides.dkv[0]),
            dkv_stride_h: i64s(grad_strides.dkv[1]),
            dkv_stride_s: i64s(grad_strides.dkv[2]),
            batch: shape.batch as i32,
            heads: shape.heads as i32,
            kv_heads: shape.kv_heads as i32,
            seqlen_q: shape.seqlen_q as i32,
            seqlen_k: shape.seqlen_k as i32,
            seqlen_q_pad: padded_rows(shape.seqlen_q).unwrap_or(0) as i32,
            n_ctas: kernel.n_ctas(shape.seqlen_k as u32) as i32,
            window_left: WINDOW_INFINITE,
            window_right: WINDOW_INFINITE,
            scale_log2: scale * std::f32::consts::LOG2_E,
            scale,
            ..BackwardParams::default()
        };
        let mut walks = None;
        match mask {
            RawBackwardMask::Window(w) => {
                let clamp = |x: Option<u32>| {
                    x.map_or(WINDOW_INFINITE, |v| v.min(WINDOW_INFINITE as u32) as i32)
                };
                params.window_left = clamp(w.left);
                params.window_right = clamp(w.right);
                params.diag_offset = w.diag_offset;
                let section = match opts.head_section {
                    Some(n) => n,
                    None => super::super::choice::backward_head_section(
                        &shape,
                        &kernel,
                        &params,
                        self.sm_count()?,
                    ),
                };
                params.head_section = i32::try_from(section).unwrap_or(i32::MAX);
            }
            RawBackwardMask::Blocks(m, fwd, bwd) => {
                let ms = m.shape();
                let acc = m.accumulator();
                params.mask_m_blocks = shape.seqlen_q.div_ceil(acc.block_m() as usize) as i32;
                params.mask_n_blocks = shape.seqlen_k.div_ceil(acc.block_n() as usize) as i32;
                params.mask_has_heads = i32::from(ms.heads > 1);
                params.mask_batch_heads = if ms.batch > 1 { ms.heads as i32 } else { 0 };
                [
                    params.kv_num_blocks,
                    params.kv_indices,
                    params.full_kv_num_blocks,
                    params.full_kv_indices,
                    _,
                ] = fwd.lists.to_array();
                [
                    params.q_num_blocks,
                    params.q_indices,
                    params.full_q_num_blocks,
                    params.full_q_indices,
                    params.q_tile_offsets,
                ] = bwd.lists.to_array();
                params.q_words = bwd.words;
                if kernel.list_entries() == ListEntries::DenseAtRunTime {
                    (params.lists_partial_count, params.lists_tiles) =
                        super::super::lists_count(m.lists(), bwd.partial_count)?;
                }
                // The deterministic mode's walk orders, from lists the host holds (not those
                // built on the GPU).
                let walk_source = (kernel.deterministic()
                    && !paired
                    && kernel.list_entries() == ListEntries::Read
                    && opts.deterministic_walks != Some(false))
                .then(|| host_transposed(m, bwd, upload))
                .flatten();
                // Its planes interleaved (key_tile::SECTION_ORDER).
                if kernel.deterministic() && !paired {
                    let section = opts.head_section.unwrap_or_else(|| {
                        super::super::choice::deterministic_head_section(
                            &shape,
                            &kernel,
                            walk_source.is_some(),
                        )
                    });
                    params.head_section = i32::try_from(section).unwrap_or(i32::MAX);
                }
                if let Some(t) = walk_source {
                    let sub = (m.accumulator().block_n() / kernel.cta_n()).max(1) as usize;
                    walks = Some(self.deterministic_walks_params(&mut params, t, sub)?);
                }
            }
        }
        let mut ctas = kernel.n_ctas(shape.seqlen_k as u32);
        let mut key_pairs = None;
        if let Some(table) = pair_table {
            let pairs = u32::try_from(table.pairs_per_plane)
                .ok()
                .filter(|&n| n <= i32::MAX as u32)
                .ok_or_else(|| AttentionError::Shape("too many key-block pairs".into()))?;
            let (buf, ptr) =
                self.upload_table(&table.ints, "uploading the paired key blocks' table")?;
            params.key_pairs = ptr;
            params.n_ctas = pairs as i32;
            ctas = pairs;
            key_pairs = Some(buf);
        }
        let mut doc_items = None;
        if let Some(docs) = documents {
            let (table, items) = self.backward_documents_params(&mut params, docs, &kernel)?;
            ctas = items;
            doc_items = Some(table);
        }
        let mut tile_order = None;
        if let (RawBackwardMask::Blocks(m, _, bwd), None, false) = (mask, documents, paired) {
            if let Some(order) = self.backward_tile_order(m, bwd, &kernel, opts, upload)? {
                let sub = (m.accumulator().block_n() / kernel.cta_n()).max(1);
                params.tile_order = order.address;
                ctas = (params.mask_n_blocks as u32).saturating_mul(sub);
                tile_order = order.uploaded;
            }
        }
        if opts.tile_order == Some(true) && params.tile_order == 0 {
            return Err(AttentionError::Config(ConfigError::Layout(
                "the largest-first tile order needs a mask's tile lists (not the window walk, \
                 the documents grid or paired key blocks), outside the deterministic mode, \
                 with the order on the device (the GPU transposer's) or the lists on the host \
                 on a prepared or planned call"
                    .into(),
            )));
        }
        Ok(Resolved {
            functions,
            maps,
            params: Params(params),
            kernel,
            shape,
            ctas,
            doc_items,
            key_pairs,
            tile_order,
            walks,
        })
    }

    /// Uploads the deterministic mode's walk orders of transposed lists `t`
    /// (`fragmask_masks::deterministic_walks`: a plane's key tiles estimated to start as
    /// many at once as the SMs over the launch section's planes, `sub` CTAs per mask key
    /// tile) and points `params`'s transposed lists at them; the words stay.
    fn deterministic_walks_params(
        &self,
        params: &mut BackwardParams,
        t: &TransposedLists,
        sub: usize,
    ) -> Result<Arc<CudaSlice<i32>>, AttentionError> {
        let lists = t.lists();
        let n_blocks = (params.mask_n_blocks.max(1)) as usize;
        let planes = (lists.rows() / n_blocks).max(1);
        let section = params.head_section.max(1) as usize;
        let at_once = (self.sm_count()? / section / sub).max(1);
        let walks = fragmask_masks::deterministic_walks(lists, planes, at_once);
        // One table: the counts, the full lists' counts (all 0), the indices, the offsets.
        let rows = walks.counts.len();
        let mut table = Vec::with_capacity(2 * rows + 2 * walks.indices.len());
        table.extend_from_slice(&walks.counts);
        table.resize(2 * rows, 0);
        table.extend_from_slice(&walks.indices);
        table.extend_from_slice(&walks.tile_offsets);
        let (buf, base) = self.upload_table(&table, "uploading the deterministic walks")?;
        let at = |ints: usize| base + 4 * ints as u64;
        params.q_num_blocks = base;
        params.full_q_num_blocks = at(rows);
        params.q_indices = at(2 * rows);
        // Never read: every full count is 0 (key_tile::LISTS reads a full entry at e >= the
        // partial count only).
        params.full_q_indices = params.q_indices;
        params.q_tile_offsets = at(2 * rows + walks.indices.len());
        Ok(buf)
    }

    /// The key tiles' largest-first dispatch order of a mask's call (docs/backward.md,
    /// "Dispatch order"; `fragmask_masks::tile_order`): the transposed lists' own where they
    /// carry one (the GPU transposer's, or a prepared mask's upload); else computed here from
    /// the host's transposed lists and uploaded where uploads are allowed and it is not the
    /// index order (or `opts.tile_order` asks for it); else none (index order). Never in the
    /// deterministic mode, whose CTAs wait for the key tiles before them in index order.
    fn backward_tile_order(
        &self,
        m: &PackedMask,
        bwd: &RawMaskLists,
        kernel: &BackwardKernel,
        opts: &BackwardOptions,
        upload: Upload,
    ) -> Result<Option<DispatchOrder>, AttentionError> {
        if kernel.deterministic() || opts.tile_order == Some(false) {
            return Ok(None);
        }
        let transposed = host_transposed(m, bwd, upload);
        self.dispatch_order(
            bwd.tile_order,
            || transposed.map(|t| t.tile_order()),
            |order| transposed.is_some_and(|t| t.is_grid_tile_order(order)),
            opts.tile_order == Some(true),
        )
    }

    /// The documents grid of `docs` ([`super::super::choice::backward_documents`]): the window
    /// of its kind on the call's own coordinates (diagonal offset 0; the kernel bounds
    /// each walk by its document) and the work-item table, uploaded here once and
    /// synchronised so a launch on any stream reads it. Returns the table and its items.
    fn backward_documents_params(
        &self,
        params: &mut BackwardParams,
        docs: &fragmask_masks::Documents,
        kernel: &BackwardKernel,
    ) -> Result<(Arc<CudaSlice<i32>>, u32), AttentionError> {
        let items = super::super::documents::key_tile_items(docs, kernel.cta_n(), kernel.step_m());
        let count = u32::try_from(items.len())
            .ok()
            .filter(|&n| {
                n.checked_mul(kernel.grid_split())
                    .is_some_and(|x| x <= i32::MAX as u32)
            })
            .ok_or_else(|| AttentionError::Shape("too many document key tiles".into()))?;
        params.window_left = WINDOW_INFINITE;
        params.window_right = match docs.kind() {
            fragmask_masks::DocumentKind::Causal => 0,
            fragmask_masks::DocumentKind::Full => WINDOW_INFINITE,
        };
        params.diag_offset = 0;
        let (table, ptr) = self.upload_table(
            &super::super::documents::key_tile_table(&items),
            "uploading the backward documents grid's work items",
        )?;
        params.doc_items = ptr;
        Ok((table, count))
    }
}

/// `m`'s transposed lists where the host holds the ones the call runs and may upload what
/// it computes from them: not lists built on the GPU (their count on the device), which
/// have only a stand-in on the host.
fn host_transposed<'m>(
    m: &'m PackedMask,
    bwd: &RawMaskLists,
    upload: Upload,
) -> Option<&'m TransposedLists> {
    let host_lists = upload == Upload::Allowed && bwd.partial_count == 0;
    host_lists.then(|| m.transposed().ok()).flatten()
}

/// Whether resolving a call may upload the documents grid's work items (a plan or a
/// prepared call: yes; a raw launch, which allocates and synchronises nothing: no, it
/// runs the tile lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Upload {
    Allowed,
    Refused,
}
