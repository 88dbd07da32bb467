//! The backward pass's transposed lists built on the GPU (`fragmask_host::gpu_packer::
//! GpuTransposer`) from a mask's forward lists and words already on the device, into
//! buffers torch owns, on torch's stream: `Mask.from_dense(cuda_mask, transposed=True)`
//! and `Mask.with_transposed()` on a mask whose lists are on a GPU.

use std::sync::{Arc, Mutex};

use fragmask_host::attention::blockmask::KERNEL_ENCODING;
use fragmask_host::cudarc::driver::result as driver;
use fragmask_host::device_lists::RawMaskLists;
use fragmask_host::gpu_packer::{GpuTransposer, PackShape, RawTransposeBuffers};
use fragmask_host::Compiler;
use fragmask_masks::{ListDirection, MaskShape, TiledAccumulator, TransposedLists};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::gpu::{self, align16, list_offsets, Enqueued, Gpu, TileKey};

/// The compiled transposer of (forward tile, backward accumulator) on `g`.
fn transposer(
    g: &Gpu,
    fwd: &TiledAccumulator,
    bwd: &TiledAccumulator,
) -> PyResult<Arc<GpuTransposer>> {
    let key = |a: &TiledAccumulator| (a.block_m(), a.block_n(), a.warpgroups(), a.swap_ab());
    let k: (TileKey, TileKey) = (key(fwd), key(bwd));
    let mut cache = g.transposers.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = cache.get(&k) {
        return Ok(t.clone());
    }
    fragmask_kernels::packer::TransposeKernels::new(fwd, bwd).map_err(|e| {
        PyValueError::new_err(format!(
            "with_transposed: the GPU packer cannot transpose this tile: {e}"
        ))
    })?;
    let t = GpuTransposer::new(&g.device, &Compiler::new(), fwd, bwd)
        .map(Arc::new)
        .map_err(|e| PyRuntimeError::new_err(format!("with_transposed: the GPU packer: {e}")))?;
    cache.insert(k, t.clone());
    Ok(t)
}

/// A transposition planned for a mask of one shape and tile: `sizes` says how much
/// memory torch allocates, `enqueue` runs the kernels on torch's stream over the mask's
/// device lists, `finish` waits and attaches the result to a host mask.
#[pyclass(frozen, module = "fragmask._fragmask", name = "GpuTranspose")]
pub(crate) struct GpuTranspose {
    /// Registry id of an empty mask of the same geometry with (empty) transposed lists of
    /// the backward accumulator: what the backward op reads on the host.
    id: u64,
    shape: PackShape,
    capacity: usize,
    gpu: Arc<Gpu>,
    transposer: Arc<GpuTransposer>,
    enqueued: Mutex<Option<Enqueued>>,
}

impl Drop for GpuTranspose {
    fn drop(&mut self) {
        gpu::unregister(self.id);
        let enqueued = self.enqueued.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = enqueued.take() {
            gpu::return_event(&self.gpu, e.event);
        }
    }
}

/// Plans the transposition of a mask `(B, H, Sq, Sk)` packed with the tile `tile`
/// (fragment-native words) for the backward accumulator of `warpgroups` (None: the
/// library's default) and `swap_ab`, with room for `capacity` partial tiles (a GPU
/// pack's tile count, or a host mask's partial tiles).
#[pyfunction]
#[pyo3(signature = (shape, tile, warpgroups, swap_ab, capacity, device))]
pub(crate) fn gpu_transpose_plan(
    shape: (usize, usize, usize, usize),
    tile: TileKey,
    warpgroups: Option<u32>,
    swap_ab: bool,
    capacity: usize,
    device: usize,
) -> PyResult<GpuTranspose> {
    let (b, h, sq, sk) = shape;
    let mask_shape =
        MaskShape::new(b, h, sq, sk).map_err(|e| crate::raise("with_transposed", e))?;
    let fwd = crate::tile(tile.0, tile.1, tile.2, tile.3, KERNEL_ENCODING.name(), 0)?.acc;
    let warpgroups = match warpgroups {
        Some(w) => w,
        None if swap_ab => TransposedLists::default_accumulator(&fwd)
            .map(|a| a.warpgroups())
            .unwrap_or(1),
        None => fwd.warpgroups(),
    };
    let bwd = TiledAccumulator::new(fwd.block_m(), fwd.block_n(), warpgroups, swap_ab)
        .map_err(|e| crate::raise("with_transposed", e.into()))?;
    let planes = mask_shape.batch * mask_shape.heads;
    let pack_shape = PackShape {
        planes,
        seqlen_q: sq,
        seqlen_k: sk,
        m_blocks: sq.div_ceil(fwd.block_m() as usize),
        n_blocks: sk.div_ceil(fwd.block_n() as usize),
    };
    if capacity > pack_shape.tiles() {
        return Err(PyValueError::new_err(format!(
            "with_transposed: {capacity} partial tiles in a grid of {}",
            pack_shape.tiles()
        )));
    }
    let g = gpu::gpu(device)?;
    let transposer = transposer(&g, &fwd, &bwd)?;
    let mut geometry = (*gpu::geometry(mask_shape, &fwd)?).clone();
    geometry
        .add_transposed(&bwd, &fragmask_masks::PackOptions::default())
        .map_err(|e| crate::raise("with_transposed", e))?;
    let t = GpuTranspose {
        id: gpu::register(&Arc::new(geometry)),
        shape: pack_shape,
        capacity,
        gpu: g,
        transposer,
        enqueued: Mutex::new(None),
    };
    t.layout()?;
    Ok(t)
}

/// Where things live: workspace (classes, tile_word, partial_source, bytes) and the i32
/// output (the lists at `list_offsets(q_rows, tiles)`, then the words, then the key tiles'
/// dispatch order, `q_rows` entries from `order_at`).
struct Layout {
    tile_word: usize,
    partial_source: usize,
    workspace_bytes: usize,
    offsets: [usize; 7],
    order_at: usize,
    out_ints: usize,
}

impl GpuTranspose {
    fn q_rows(&self) -> usize {
        self.shape.planes * self.shape.n_blocks
    }

    fn layout(&self) -> PyResult<Layout> {
        let tiles = self.shape.tiles();
        let too_large = || PyValueError::new_err("with_transposed: the mask is too large");
        let tile_word = align16(tiles).ok_or_else(too_large)?;
        let partial_source = tiles
            .checked_mul(4)
            .and_then(|b| b.checked_add(tile_word))
            .and_then(align16)
            .ok_or_else(too_large)?;
        let workspace_bytes = tiles
            .checked_mul(4)
            .and_then(|b| b.checked_add(partial_source))
            .and_then(align16)
            .ok_or_else(too_large)?;
        let offsets = list_offsets(self.q_rows(), tiles);
        let order_at = self
            .capacity
            .checked_mul(self.transposer.words_per_tile())
            .and_then(|w| w.max(4).checked_add(offsets[6]))
            .ok_or_else(too_large)?;
        let out_ints = order_at
            .checked_add(self.q_rows())
            .filter(|&n| n.checked_mul(4).is_some_and(|b| b <= isize::MAX as usize))
            .ok_or_else(too_large)?;
        Ok(Layout {
            tile_word,
            partial_source,
            workspace_bytes,
            offsets,
            order_at,
            out_ints,
        })
    }
}

#[pymethods]
impl GpuTranspose {
    /// (q_rows, tiles, words_per_tile, workspace_bytes, out_ints, words_at, m_blocks,
    /// n_blocks): a u8 workspace and an i32 output (both 16-byte aligned, from torch)
    /// holding `q_num_blocks`, `full_q_num_blocks` (q_rows each), `q_indices`,
    /// `full_q_indices`, `q_tile_offsets` (tiles each), the count, then the words from
    /// entry `words_at`, then the key tiles' dispatch order (`q_rows` entries, the last).
    #[getter]
    fn sizes(&self) -> PyResult<gpu::Sizes> {
        let l = self.layout()?;
        Ok((
            self.q_rows(),
            self.shape.tiles(),
            self.transposer.words_per_tile(),
            l.workspace_bytes,
            l.out_ints,
            l.offsets[6],
            self.shape.m_blocks,
            self.shape.n_blocks,
        ))
    }

    /// The key the backward op finds this mask's geometry (with transposed lists) by.
    #[getter]
    fn registry_id(&self) -> u64 {
        self.id
    }

    /// The backward accumulator (block_m, block_n, warpgroups, swap_ab).
    #[getter]
    fn backward(&self) -> TileKey {
        let a = self.transposer.backward();
        (a.block_m(), a.block_n(), a.warpgroups(), a.swap_ab())
    }

    /// Enqueues the kernels on `stream` (torch's current stream of the plan's device):
    /// `lists` are the device addresses of the mask's kv_num_blocks, kv_indices,
    /// full_kv_num_blocks, full_kv_indices, kv_tile_offsets and words (`capacity` tiles
    /// of them), written earlier on this stream; the buffers are sized by `sizes`.
    /// Once only.
    fn enqueue(&self, lists: [u64; 6], workspace: u64, out: u64, stream: u64) -> PyResult<()> {
        let mut enqueued = self.enqueued.lock().unwrap_or_else(|e| e.into_inner());
        if enqueued.is_some() {
            return Err(PyValueError::new_err(
                "with_transposed: this transposition was enqueued already",
            ));
        }
        let l = self.layout()?;
        let forward = RawMaskLists::from_array(lists);
        let at = |base: u64, bytes: usize| base.checked_add(bytes as u64).unwrap_or(0);
        let o = l.offsets.map(|i| at(out, 4 * i));
        let raw = RawTransposeBuffers {
            forward: forward.lists,
            words: forward.words,
            classes: workspace,
            tile_word: at(workspace, l.tile_word),
            partial_source: at(workspace, l.partial_source),
            transposed: gpu::raw_lists(out, &l.offsets),
            partial_count: o[5],
            tile_order: at(out, 4 * l.order_at),
            q_words: o[6],
        };
        let g = &self.gpu;
        // SAFETY: torch's current stream of this device (the wrapper reads it with torch).
        let stream = unsafe { g.device.borrowed_stream(stream) };
        // SAFETY: `lists` are data_ptr()s of the mask's live device lists of the plan's
        // shape (views of a GPU pack's buffer, or copies of a validated host mask's
        // lists), and `workspace` / `out` fresh torch allocations sized by `sizes`
        // (16-byte aligned), all kept alive by the wrapper until `finish` or this
        // object is dropped; enqueue_raw checks the shape and the alignment again.
        unsafe {
            self.transposer
                .enqueue_raw(&stream, self.shape, self.capacity, &raw)
        }
        .map_err(|e| PyValueError::new_err(format!("with_transposed: {e}")))?;
        let event = gpu::take_event(g, "with_transposed")?;
        event.record(&stream).map_err(|e| {
            PyRuntimeError::new_err(format!("with_transposed: recording an event: {e}"))
        })?;
        *enqueued = Some(Enqueued { event, out });
        gpu::record_gpu_built(
            self.id,
            gpu::GpuBuilt {
                lists_at: raw.transposed.num_blocks,
                partial_count: raw.partial_count,
                tile_order: raw.tile_order,
            },
        );
        Ok(())
    }

    /// Waits for the transposition and returns `packed` (the same mask's host copy) with
    /// the transposed lists attached, validated as a file's are (GIL released). They are
    /// the output buffer's lists and words as they are (`attach_transposed` validates
    /// without reordering), so the backward may plan its paired key blocks from them.
    fn finish(&self, py: Python<'_>, packed: &crate::Packed) -> PyResult<crate::Packed> {
        let enqueued = self.enqueued.lock().unwrap_or_else(|e| e.into_inner());
        let Some(e) = enqueued.as_ref() else {
            return Err(PyValueError::new_err(
                "with_transposed: this transposition was not enqueued",
            ));
        };
        let l = self.layout()?;
        let q_rows = self.q_rows();
        let wpt = self.transposer.words_per_tile();
        let backward = *self.transposer.backward();
        let mut mask = (*packed.inner).clone();
        let read = || -> Result<fragmask_masks::PackedMask, String> {
            e.event
                .synchronize()
                .map_err(|err| format!("waiting for the transposition: {err}"))?;
            let mut all = vec![0i32; l.offsets[5] + 1];
            // SAFETY: `out` addresses the i32 output of `out_ints >= offsets[5] + 1`
            // entries (kept alive by the wrapper), complete after the event; the
            // context is current on this thread (the event's synchronize bound it).
            unsafe { driver::memcpy_dtoh_sync(&mut all, e.out) }
                .map_err(|err| format!("reading the transposed lists: {err}"))?;
            let count = usize::try_from(all[l.offsets[5]])
                .ok()
                .filter(|&c| c <= self.capacity)
                .ok_or_else(|| format!("transposed partial tile count {}", all[l.offsets[5]]))?;
            let mut words = vec![0u32; count * wpt];
            // SAFETY: the words hold `capacity * wpt >= count * wpt` u32 from entry
            // `offsets[6]` of the same buffer (`sizes`).
            unsafe { driver::memcpy_dtoh_sync(&mut words, e.out + 4 * l.offsets[6] as u64) }
                .map_err(|err| format!("reading the transposed words: {err}"))?;
            let lists = gpu::lists_from_buffer(
                &all,
                &l.offsets,
                ListDirection::Transposed,
                q_rows,
                self.shape.m_blocks,
            )?;
            mask.attach_transposed(&backward, lists, words)
                .map_err(|err| format!("the GPU's transposed lists: {err}"))?;
            Ok(mask)
        };
        let mask = py
            .detach(read)
            .map_err(|m| PyRuntimeError::new_err(format!("with_transposed: {m}")))?;
        Ok(crate::Packed::new(mask))
    }
}
