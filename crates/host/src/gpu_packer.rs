//! Typed launches of the GPU packer (`fragmask_kernels::packer`): a dense bool mask on
//! the device → FlexAttention-style tile lists + FragmentNative words, bit for bit the
//! CPU packer's output (`fragmask_masks::pack`).
//!
//! ```no_run
//! use fragmask_host::gpu_packer::GpuPacker;
//! use fragmask_host::{Compiler, Device};
//! use fragmask_masks::TiledAccumulator;
//! # fn main() -> fragmask_host::Result<()> {
//! let device = Device::first()?;
//! let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
//! let packer = GpuPacker::new(&device, &Compiler::new(), &acc)?;
//! let dense = vec![1u8; 300 * 500];
//! let packed = packer.pack_host(&dense, 1, 300, 500)?;
//! assert_eq!(packed.lists.num_blocks().len(), 3);
//! # Ok(()) }
//! ```

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use fragmask_kernels::packer::{
    PackerKernels, TransposeKernels, CLASSES_KERNEL, CLASSES_THREADS, COMPACT_KERNEL,
    COMPACT_THREADS, LISTS_KERNEL, LIST_THREADS, ORDER_THREADS, ROW_ORDER_KERNEL, TILES_KERNEL,
    TILE_ORDER_KERNEL, TRANSCODE_KERNEL, TRANSPOSED_LISTS_KERNEL,
};
use fragmask_masks::{BlockLists, Encoding, ListDirection, PackedMask, TiledAccumulator};

use crate::device::multiprocessors;
use crate::device::Device;
use crate::device_lists::{read_i32s, DeviceBlockLists, RawBlockLists};
use crate::error::codegen;
use crate::error::{Error, Result};
use crate::launch::{launch, KernelArg, Launch};
use crate::module_cache::compile_for_device;
use crate::nvrtc::Compiler;

/// The most CTAs along a grid's y dimension (CUDA C++ Programming Guide, technical
/// specifications).
const MAX_GRID_Y: u32 = 65_535;

/// The kernels of the packer's module.
const PACKER_KERNELS: [&str; 4] = [TILES_KERNEL, LISTS_KERNEL, ROW_ORDER_KERNEL, COMPACT_KERNEL];

/// The kernels of the transposed-list module.
const TRANSPOSER_KERNELS: [&str; 4] = [
    CLASSES_KERNEL,
    TRANSPOSED_LISTS_KERNEL,
    TILE_ORDER_KERNEL,
    TRANSCODE_KERNEL,
];

/// The shape the packer works on: `planes` (batch × heads) planes of
/// `seqlen_q × seqlen_k` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackShape {
    /// Planes (batch × heads as stored: 1 when broadcast).
    pub planes: usize,
    /// Query length.
    pub seqlen_q: usize,
    /// Key length.
    pub seqlen_k: usize,
    /// `ceil(seqlen_q / block_m)`.
    pub m_blocks: usize,
    /// `ceil(seqlen_k / block_n)`.
    pub n_blocks: usize,
}

impl PackShape {
    /// Rows of tiles: `planes × m_blocks`.
    pub fn rows(&self) -> usize {
        self.planes * self.m_blocks
    }

    /// Tiles: `rows × n_blocks`.
    pub fn tiles(&self) -> usize {
        self.rows() * self.n_blocks
    }

    /// Bytes of the dense mask.
    pub fn dense_bytes(&self) -> usize {
        self.planes * self.seqlen_q * self.seqlen_k
    }
}

/// Device buffers of one pack.
#[derive(Debug)]
pub struct PackBuffers {
    shape: PackShape,
    scratch: CudaSlice<u32>,
    classes: CudaSlice<u8>,
    lists: DeviceBlockLists,
    partial_source: CudaSlice<i32>,
    partial_count: CudaSlice<i32>,
    row_order: CudaSlice<i32>,
    words: CudaSlice<u32>,
}

impl PackBuffers {
    /// The shape they were sized for.
    pub fn shape(&self) -> PackShape {
        self.shape
    }
}

/// Device addresses of one pack's buffers owned elsewhere (torch tensors, say), for
/// [`GpuPacker::enqueue_raw`]. Sizes for a [`PackShape`] with `tiles` tiles and `rows`
/// rows and the packer's `wpt` words per tile: `scratch` and `words` u32
/// `[tiles * wpt]` (16-byte aligned; `words` is the result, the first
/// `partial_count * wpt` of them); `classes` u8 `[tiles]`; `lists` the forward lists
/// ([`RawBlockLists`]: i32 counts `[rows]`, entries `[tiles]`); `partial_source` i32
/// `[tiles]`; `partial_count` i32 `[1]`; `row_order` i32 `[rows]` (the forward's dispatch
/// order of the row blocks, `fragmask_masks::row_order`).
/// Nothing needs zeroing: the kernels write every list entry (padding too), the count,
/// and every word below it. `scratch`, `classes` and `partial_source` are workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPackBuffers {
    /// Workspace: every partial tile's words at its tile index.
    pub scratch: u64,
    /// Workspace: every tile's class byte.
    pub classes: u64,
    /// Result: the forward tile lists (`kv_*`).
    pub lists: RawBlockLists,
    /// Workspace: each partial tile's scratch slot.
    pub partial_source: u64,
    /// Result: the number of partial tiles.
    pub partial_count: u64,
    /// Result: the row blocks' dispatch order.
    pub row_order: u64,
    /// Result: the partial tiles' words.
    pub words: u64,
}

/// A packed mask read back from the device, in the CPU packer's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuPacked {
    /// The shape.
    pub shape: PackShape,
    /// The forward lists, `[planes, m_blocks]` counts and `[planes, m_blocks,
    /// n_blocks]` entries (padded with 0, and -1 in the tile offsets), as read back
    /// (not validated: `PackedMask::from_parts` does that).
    pub lists: BlockLists,
    /// `[partial_tiles, threads, words_per_thread]`.
    pub words: Vec<u32>,
    /// The forward's dispatch order of the row blocks, `[planes, m_blocks]`
    /// (`PackedMask::row_order` of the same lists).
    pub row_order: Vec<i32>,
}

/// The compiled packer kernels on one device.
#[derive(Debug)]
pub struct GpuPacker {
    kernels: PackerKernels,
    stream: Arc<CudaStream>,
    tiles: CudaFunction,
    lists: CudaFunction,
    row_order: CudaFunction,
    compact: CudaFunction,
    compact_blocks: u32,
    tile_blocks: u32,
}

impl GpuPacker {
    /// Compiles and loads the packer for `acc` on `device`.
    pub fn new(device: &Device, compiler: &Compiler, acc: &TiledAccumulator) -> Result<Self> {
        let kernels = PackerKernels::new(acc).map_err(codegen)?;
        let module = compile_for_device(device, compiler, &kernels.source(), &PACKER_KERNELS)?;
        let tiles = module.function(TILES_KERNEL)?;
        // Persistent tile CTAs: exactly as many as are resident at once.
        let per_sm = tiles
            .occupancy_max_active_blocks_per_multiprocessor(acc.threads(), 0, None)
            .map_err(Error::driver("reading the packer's occupancy"))?
            .max(1) as usize;
        Ok(Self {
            tile_blocks: (multiprocessors(device)? * per_sm) as u32,
            tiles,
            lists: module.function(LISTS_KERNEL)?,
            row_order: module.function(ROW_ORDER_KERNEL)?,
            compact: module.function(COMPACT_KERNEL)?,
            compact_blocks: (multiprocessors(device)? * 8) as u32,
            stream: device.default_stream(),
            kernels,
        })
    }

    /// The stream the packer runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The shape of `planes × seqlen_q × seqlen_k` under the packer's tile.
    pub fn shape(&self, planes: usize, seqlen_q: usize, seqlen_k: usize) -> Result<PackShape> {
        if planes == 0 || seqlen_q == 0 || seqlen_k == 0 {
            return Err(Error::InvalidArgument(format!(
                "mask extents must be positive, got {planes} x {seqlen_q} x {seqlen_k}"
            )));
        }
        let acc = self.kernels.accumulator();
        let shape = PackShape {
            planes,
            seqlen_q,
            seqlen_k,
            m_blocks: seqlen_q.div_ceil(acc.block_m() as usize),
            n_blocks: seqlen_k.div_ceil(acc.block_n() as usize),
        };
        let fits = |v: usize| i32::try_from(v).is_ok();
        if !fits(shape.tiles()) || !fits(seqlen_q) || !fits(seqlen_k) {
            return Err(Error::InvalidArgument(format!(
                "mask {planes} x {seqlen_q} x {seqlen_k} is too large for the GPU packer \
                 (tiles and lengths must fit in i32)"
            )));
        }
        Ok(shape)
    }

    /// Allocates the buffers of one pack of `shape` (the words for the worst case, every
    /// tile partial).
    pub fn buffers(&self, shape: PackShape) -> Result<PackBuffers> {
        let s = &self.stream;
        let wpt = self.kernels.words_per_tile();
        let alloc_i32 = |n: usize| {
            s.alloc_zeros::<i32>(n.max(1))
                .map_err(Error::driver("allocating packer lists"))
        };
        let lists = DeviceBlockLists::alloc(s, shape.rows(), shape.tiles())
            .map_err(Error::driver("allocating packer lists"))?;
        Ok(PackBuffers {
            shape,
            scratch: s
                .alloc_zeros::<u32>(shape.tiles() * wpt)
                .map_err(Error::driver("allocating the packer scratch"))?,
            classes: s
                .alloc_zeros::<u8>(shape.tiles())
                .map_err(Error::driver("allocating the tile classes"))?,
            lists,
            partial_source: alloc_i32(shape.tiles())?,
            partial_count: alloc_i32(1)?,
            row_order: alloc_i32(shape.rows())?,
            words: s
                .alloc_zeros::<u32>(shape.tiles() * wpt)
                .map_err(Error::driver("allocating the packed words"))?,
        })
    }

    /// Enqueues the three kernels on the packer's stream: `dense` (`[planes][seqlen_q][seqlen_k]`
    /// bytes, nonzero = 1) into `buffers`.
    pub fn enqueue(&self, dense: &CudaSlice<u8>, buffers: &mut PackBuffers) -> Result<()> {
        let (ptr, _sync) = dense.device_ptr(&self.stream);
        // SAFETY: `ptr` addresses `dense`, borrowed until the launches are enqueued and
        // kept alive by the caller's borrow; its length is checked against the shape.
        unsafe { self.enqueue_ptr(ptr, dense.len(), buffers) }
    }

    /// As [`Self::enqueue`] on a dense mask owned elsewhere (a torch tensor, say):
    /// `len` bytes at device address `ptr`.
    ///
    /// # Safety
    /// `ptr` must address `len` readable bytes of a live allocation of this context,
    /// valid until the packer's stream has run the kernels, and any writes to them must
    /// be ordered before this call on the packer's stream.
    pub unsafe fn enqueue_ptr(
        &self,
        ptr: u64,
        len: usize,
        buffers: &mut PackBuffers,
    ) -> Result<()> {
        let s = &self.stream;
        let shape = buffers.shape;
        // The guards keep cudarc's stream-order tracking of each buffer until the
        // launches are enqueued.
        let (scratch, _g0) = buffers.scratch.device_ptr_mut(s);
        let (classes, _g1) = buffers.classes.device_ptr_mut(s);
        let (lists, _g2) = buffers.lists.raw_mut(s);
        let (partial_source, _g7) = buffers.partial_source.device_ptr_mut(s);
        let (partial_count, _g8) = buffers.partial_count.device_ptr_mut(s);
        let (row_order, _g9) = buffers.row_order.device_ptr_mut(s);
        let (words, _g10) = buffers.words.device_ptr_mut(s);
        let raw = RawPackBuffers {
            scratch,
            classes,
            lists,
            partial_source,
            partial_count,
            row_order,
            words,
        };
        // SAFETY: `ptr` / `len` by this function's contract; the buffers were sized for
        // `shape` by `Self::buffers` and are borrowed mutably for the call.
        unsafe { self.enqueue_raw(s, ptr, len, shape, &raw) }
    }

    /// Enqueues the three kernels on `stream` (a stream of this device's context, torch's
    /// say) over buffers owned elsewhere, sized and aligned as [`RawPackBuffers`] says
    /// for `shape` (from [`Self::shape`]). Nothing is allocated or synchronised.
    ///
    /// # Safety
    /// `dense` must address `len` readable bytes and every address of `out` a writable
    /// live allocation of this context of the size [`RawPackBuffers`] gives, none
    /// overlapping another, all valid until `stream` has run the kernels, with earlier
    /// writes to the input ordered before this call on `stream`.
    pub unsafe fn enqueue_raw(
        &self,
        stream: &Arc<CudaStream>,
        dense: u64,
        len: usize,
        shape: PackShape,
        out: &RawPackBuffers,
    ) -> Result<()> {
        if self.shape(shape.planes, shape.seqlen_q, shape.seqlen_k)? != shape {
            return Err(Error::InvalidArgument(format!(
                "pack shape {shape:?} is not the packer's shape of its extents"
            )));
        }
        if len != shape.dense_bytes() {
            return Err(Error::InvalidArgument(format!(
                "dense mask holds {len} bytes, the shape needs {}",
                shape.dense_bytes()
            )));
        }
        let aligned = [
            (out.scratch, 16),
            (out.words, 16),
            (out.partial_source, 4),
            (out.partial_count, 4),
            (out.row_order, 4),
        ];
        if dense == 0 || !out.lists.aligned() || aligned.iter().any(|&(p, a)| p == 0 || p % a != 0)
        {
            return Err(Error::InvalidArgument(
                "packer buffers must be non-null, words and scratch 16-byte aligned, \
                 lists 4-byte aligned"
                    .into(),
            ));
        }
        let acc = self.kernels.accumulator();
        let chunk = self.kernels.chunk_bytes() as usize;
        let vector_ok = i32::from(shape.seqlen_k % chunk == 0 && dense as usize % chunk == 0);
        let (sq, sk) = (shape.seqlen_q as i32, shape.seqlen_k as i32);
        let (mb, nb) = (shape.m_blocks as i32, shape.n_blocks as i32);
        let rows = shape.rows() as i32;
        let capacity = shape.tiles() as i32;
        let args = [
            KernelArg::new(&dense),
            KernelArg::new(&sq),
            KernelArg::new(&sk),
            KernelArg::new(&mb),
            KernelArg::new(&nb),
            KernelArg::new(&capacity),
            KernelArg::new(&vector_ok),
            KernelArg::new(&out.scratch),
            KernelArg::new(&out.classes),
        ];
        // SAFETY: `fragmask_pack_tiles(const u8* dense, int sq, int sk, int mb, int nb,
        // int tiles, int vector_ok, u32* scratch, u8* classes)`; its CTAs walk tiles
        // below `tiles`, read only inside the `planes * sq * sk` bytes (rows and columns
        // are clamped to the mask) and write `classes[tiles]` and `scratch[tiles * wpt]`,
        // the buffers' sizes; `vector_ok` is set only when 16-byte (8-byte) loads are
        // aligned.
        unsafe {
            launch_row(
                stream,
                &self.tiles,
                self.tile_blocks.min(capacity as u32),
                acc.threads(),
                &args,
                "launching the packer tile kernel",
            )?
        };
        let args = [
            KernelArg::new(&out.classes),
            KernelArg::new(&rows),
            KernelArg::new(&nb),
            KernelArg::new(&out.lists.num_blocks),
            KernelArg::new(&out.lists.indices),
            KernelArg::new(&out.lists.full_num_blocks),
            KernelArg::new(&out.lists.full_indices),
            KernelArg::new(&out.lists.tile_offsets),
            KernelArg::new(&out.partial_source),
            KernelArg::new(&out.partial_count),
        ];
        // SAFETY: `fragmask_pack_lists(const u8* classes, int rows, int nb, int* ...)`;
        // one CTA reads `rows * nb` classes and writes `rows` counts, `rows * nb` list
        // entries, at most `rows * nb` partial sources and one count: the buffer sizes.
        unsafe {
            launch_row(
                stream,
                &self.lists,
                1,
                LIST_THREADS,
                &args,
                "launching the packer list kernel",
            )?
        };
        // SAFETY: the counts are the `rows = planes * m_blocks` the list kernel wrote (earlier
        // on `stream`); `row_order` holds `rows`.
        unsafe {
            launch_order(
                stream,
                &self.row_order,
                out.lists,
                shape.planes,
                shape.m_blocks,
                out.row_order,
                "launching the packer's row-order kernel",
            )?
        };
        let args = [
            KernelArg::new(&out.scratch),
            KernelArg::new(&out.partial_source),
            KernelArg::new(&out.partial_count),
            KernelArg::new(&capacity),
            KernelArg::new(&out.words),
        ];
        // SAFETY: `fragmask_pack_compact(const u32* scratch, const int* source,
        // const int* count, int capacity, u32* words)` copies at most `capacity` (= tiles)
        // tiles from scratch slots below `tiles` into `words`, sized `tiles * wpt`.
        unsafe {
            launch_row(
                stream,
                &self.compact,
                self.compact_blocks.min(capacity.max(1) as u32),
                COMPACT_THREADS,
                &args,
                "launching the packer compaction kernel",
            )
        }
    }

    /// Words per partial tile of the packer's tile (FragmentNative).
    pub fn words_per_tile(&self) -> usize {
        self.kernels.words_per_tile()
    }

    /// The tile configuration.
    pub fn accumulator(&self) -> &TiledAccumulator {
        self.kernels.accumulator()
    }

    /// Waits for the stream and copies the result back.
    pub fn download(&self, buffers: &PackBuffers) -> Result<GpuPacked> {
        let s = &self.stream;
        let shape = buffers.shape;
        let count = read_i32s(s, &buffers.partial_count, 1, "reading packer lists")?[0];
        let count = usize::try_from(count)
            .map_err(|_| Error::InvalidArgument(format!("partial count {count}")))?;
        let wpt = self.kernels.words_per_tile();
        let mut words = s
            .clone_dtoh(&buffers.words)
            .map_err(Error::driver("reading packed words"))?;
        words.truncate(count * wpt);
        let packed = GpuPacked {
            shape,
            lists: buffers.lists.download(
                s,
                ListDirection::Forward,
                shape.rows(),
                shape.n_blocks,
            )?,
            words,
            row_order: read_i32s(s, &buffers.row_order, shape.rows(), "reading the row order")?,
        };
        s.synchronize()
            .map_err(Error::driver("running the packer"))?;
        Ok(packed)
    }

    /// Packs device bytes `[planes][seqlen_q][seqlen_k]` owned elsewhere: run, download
    /// (synchronises the packer's stream).
    ///
    /// # Safety
    /// As [`Self::enqueue_ptr`], with `len = planes * seqlen_q * seqlen_k`.
    pub unsafe fn pack_device(
        &self,
        ptr: u64,
        planes: usize,
        seqlen_q: usize,
        seqlen_k: usize,
    ) -> Result<GpuPacked> {
        let shape = self.shape(planes, seqlen_q, seqlen_k)?;
        let mut buffers = self.buffers(shape)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { self.enqueue_ptr(ptr, shape.dense_bytes(), &mut buffers)? };
        self.download(&buffers)
    }

    /// Packs host bytes `[planes][seqlen_q][seqlen_k]`: upload, run, download.
    pub fn pack_host(
        &self,
        dense: &[u8],
        planes: usize,
        seqlen_q: usize,
        seqlen_k: usize,
    ) -> Result<GpuPacked> {
        let shape = self.shape(planes, seqlen_q, seqlen_k)?;
        let d = self
            .stream
            .clone_htod(dense)
            .map_err(Error::driver("uploading the dense mask"))?;
        let mut buffers = self.buffers(shape)?;
        self.enqueue(&d, &mut buffers)?;
        self.download(&buffers)
    }
}

/// Device addresses of one transposition's buffers, for [`GpuTransposer::enqueue_raw`],
/// for a [`PackShape`] with `tiles` tiles, `planes * n_blocks` transposed rows, and
/// `capacity` partial tiles of room. Inputs (a packed mask's forward lists and words,
/// as [`RawPackBuffers`] holds them after a pack, or any mask uploaded): `forward`
/// (i32 counts `[planes * m_blocks]`, entries `[tiles]`), u32 `words [capacity *
/// forward words per tile]`. Workspace: u8 `classes [tiles]`, i32 `tile_word` and
/// `partial_source [tiles]`. Results (every entry written, padding included):
/// `transposed` (i32 counts `[planes * n_blocks]`, entries `[tiles]`), i32
/// `partial_count [1]`, i32 `tile_order [planes * n_blocks]` (the backward's dispatch
/// order, `fragmask_masks::tile_order`), u32 `q_words [capacity * backward words per
/// tile]` (its first `partial_count` tiles). `words` and `q_words` 16-byte aligned, the rest 4-byte
/// aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawTransposeBuffers {
    /// Input: the forward lists (`kv_*`).
    pub forward: RawBlockLists,
    /// Input: the forward words.
    pub words: u64,
    /// Workspace: every tile's class byte.
    pub classes: u64,
    /// Workspace: every partial tile's index into `words`.
    pub tile_word: u64,
    /// Workspace: each transposed partial tile's forward tile.
    pub partial_source: u64,
    /// Result: the transposed lists (`q_*`).
    pub transposed: RawBlockLists,
    /// Result: the number of partial tiles.
    pub partial_count: u64,
    /// Result: the key tiles' dispatch order.
    pub tile_order: u64,
    /// Result: the transposed words.
    pub q_words: u64,
}

/// Transposed lists read back from the device, in the CPU's layout
/// (`fragmask_masks::TransposedLists`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuTransposed {
    /// The transposed lists, `[planes, n_blocks]` counts and `[planes, n_blocks,
    /// m_blocks]` entries (padded with 0, and -1 in the tile offsets), as read back
    /// (not validated: `PackedMask::attach_transposed` does that).
    pub lists: BlockLists,
    /// `[partial_tiles, threads, words_per_thread]` of the backward accumulator.
    pub words: Vec<u32>,
    /// The backward's dispatch order of the key tiles, `[planes, n_blocks]`
    /// (`TransposedLists::tile_order` of the same lists).
    pub tile_order: Vec<i32>,
}

impl GpuTransposed {
    /// The lists and words, for `PackedMask::attach_transposed`.
    pub fn into_parts(self) -> (BlockLists, Vec<u32>) {
        (self.lists, self.words)
    }
}

/// Device buffers of one transposition (workspace and results; the inputs are a
/// [`PackBuffers`]' or the caller's).
#[derive(Debug)]
pub struct TransposeBuffers {
    shape: PackShape,
    capacity: usize,
    classes: CudaSlice<u8>,
    tile_word: CudaSlice<i32>,
    partial_source: CudaSlice<i32>,
    lists: DeviceBlockLists,
    partial_count: CudaSlice<i32>,
    tile_order: CudaSlice<i32>,
    q_words: CudaSlice<u32>,
}

/// The compiled transposed-list kernels (`fragmask_kernels::packer::TransposeKernels`)
/// on one device: a packed mask's forward lists and words on the device → the backward
/// pass's transposed lists and words, bit for bit `PackedMask::add_transposed`'s.
#[derive(Debug)]
pub struct GpuTransposer {
    kernels: TransposeKernels,
    stream: Arc<CudaStream>,
    classes: CudaFunction,
    lists: CudaFunction,
    tile_order: CudaFunction,
    transcode: CudaFunction,
    transcode_blocks: u32,
}

impl GpuTransposer {
    /// Compiles and loads the kernels for the forward tile `forward` and the backward
    /// accumulator `backward` (same `block_m × block_n`; SwapAB by default, see
    /// `fragmask_masks::TransposedLists::default_accumulator`).
    pub fn new(
        device: &Device,
        compiler: &Compiler,
        forward: &TiledAccumulator,
        backward: &TiledAccumulator,
    ) -> Result<Self> {
        let kernels = TransposeKernels::new(forward, backward).map_err(codegen)?;
        let module = compile_for_device(device, compiler, &kernels.source(), &TRANSPOSER_KERNELS)?;
        let transcode = module.function(TRANSCODE_KERNEL)?;
        let per_sm = transcode
            .occupancy_max_active_blocks_per_multiprocessor(kernels.threads(), 0, None)
            .map_err(Error::driver("reading the transcode kernel's occupancy"))?
            .max(1) as usize;
        Ok(Self {
            transcode_blocks: (multiprocessors(device)? * per_sm) as u32,
            classes: module.function(CLASSES_KERNEL)?,
            lists: module.function(TRANSPOSED_LISTS_KERNEL)?,
            tile_order: module.function(TILE_ORDER_KERNEL)?,
            transcode,
            stream: device.default_stream(),
            kernels,
        })
    }

    /// The forward tile configuration.
    pub fn forward(&self) -> &TiledAccumulator {
        self.kernels.forward()
    }

    /// The backward accumulator.
    pub fn backward(&self) -> &TiledAccumulator {
        self.kernels.backward()
    }

    /// Words per transposed partial tile.
    pub fn words_per_tile(&self) -> usize {
        self.kernels.backward_words_per_tile()
    }

    /// Allocates the workspace and results for `shape` with room for `capacity` partial
    /// tiles (`shape.tiles()` after a GPU pack, whose count is on the device).
    pub fn buffers(&self, shape: PackShape, capacity: usize) -> Result<TransposeBuffers> {
        let s = &self.stream;
        let alloc_i32 = |n: usize| {
            s.alloc_zeros::<i32>(n.max(1))
                .map_err(Error::driver("allocating transposed lists"))
        };
        let q_rows = shape.planes * shape.n_blocks;
        Ok(TransposeBuffers {
            shape,
            capacity,
            classes: s
                .alloc_zeros::<u8>(shape.tiles())
                .map_err(Error::driver("allocating the tile classes"))?,
            tile_word: alloc_i32(shape.tiles())?,
            partial_source: alloc_i32(shape.tiles())?,
            lists: DeviceBlockLists::alloc(s, q_rows, shape.tiles())
                .map_err(Error::driver("allocating transposed lists"))?,
            partial_count: alloc_i32(1)?,
            tile_order: alloc_i32(q_rows)?,
            q_words: s
                .alloc_zeros::<u32>((capacity * self.words_per_tile()).max(4))
                .map_err(Error::driver("allocating the transposed words"))?,
        })
    }

    /// Enqueues the three kernels on the transposer's stream over the forward lists and
    /// words of a GPU pack (`pack`, enqueued earlier on the same stream) into `out`.
    pub fn enqueue_after_pack(&self, pack: &PackBuffers, out: &mut TransposeBuffers) -> Result<()> {
        if pack.shape != out.shape || out.capacity != pack.shape.tiles() {
            return Err(Error::InvalidArgument(format!(
                "transpose buffers for {:?} (room for {} tiles) do not fit a pack of {:?}",
                out.shape, out.capacity, pack.shape
            )));
        }
        let s = &self.stream;
        let (forward, _i0) = pack.lists.raw(s);
        let (words, _i5) = pack.words.device_ptr(s);
        // SAFETY: the inputs are live buffers of this context sized for the pack's
        // shape by `GpuPacker::buffers` (`tiles` tiles of words: the capacity, checked
        // above), borrowed until the launches are enqueued; the pack's writes are
        // ordered before these kernels on the shared stream.
        unsafe { self.enqueue_into(forward, words, out) }
    }

    /// Enqueues the three kernels on the transposer's stream over the forward lists
    /// and words at `forward` and `words` into `out` (borrowed for the launches).
    ///
    /// # Safety
    /// `forward` and `words` must address a valid packed mask's forward lists for
    /// `out`'s shape and `out`'s capacity in tiles of forward words: live allocations
    /// of this context, valid until the stream has run the kernels, with their writes
    /// ordered before this call on the transposer's stream.
    unsafe fn enqueue_into(
        &self,
        forward: RawBlockLists,
        words: u64,
        out: &mut TransposeBuffers,
    ) -> Result<()> {
        let s = &self.stream;
        let (classes, _g0) = out.classes.device_ptr_mut(s);
        let (tile_word, _g1) = out.tile_word.device_ptr_mut(s);
        let (partial_source, _g2) = out.partial_source.device_ptr_mut(s);
        let (transposed, _g3) = out.lists.raw_mut(s);
        let (partial_count, _g8) = out.partial_count.device_ptr_mut(s);
        let (tile_order, _g9) = out.tile_order.device_ptr_mut(s);
        let (q_words, _g10) = out.q_words.device_ptr_mut(s);
        let raw = RawTransposeBuffers {
            forward,
            words,
            classes,
            tile_word,
            partial_source,
            transposed,
            partial_count,
            tile_order,
            q_words,
        };
        // SAFETY: the inputs by this function's contract; the outputs sized for
        // `out.shape` and `out.capacity` by `Self::buffers` and borrowed mutably until
        // the launches are enqueued.
        unsafe { self.enqueue_raw(s, out.shape, out.capacity, &raw) }
    }

    /// Enqueues the three kernels on `stream` over buffers owned elsewhere, sized and
    /// aligned as [`RawTransposeBuffers`] says for `shape` and `capacity`. Nothing is
    /// allocated or synchronised.
    ///
    /// # Safety
    /// Every address of `b` must be a live allocation of this context of the size
    /// [`RawTransposeBuffers`] gives (inputs readable, the rest writable and not
    /// overlapping anything else), valid until `stream` has run the kernels, with the
    /// inputs' writes ordered before this call on `stream` and the inputs a valid
    /// packed mask's lists (as `PackedMask` validates them; the kernels skip entries
    /// out of range but would then leave transposed entries unwritten).
    pub unsafe fn enqueue_raw(
        &self,
        stream: &Arc<CudaStream>,
        shape: PackShape,
        capacity: usize,
        b: &RawTransposeBuffers,
    ) -> Result<()> {
        let fwd = self.kernels.forward();
        let expected = PackShape {
            m_blocks: shape.seqlen_q.div_ceil(fwd.block_m() as usize),
            n_blocks: shape.seqlen_k.div_ceil(fwd.block_n() as usize),
            ..shape
        };
        let fits = |v: usize| i32::try_from(v).is_ok();
        if expected != shape || shape.planes == 0 || !fits(shape.tiles()) || !fits(capacity) {
            return Err(Error::InvalidArgument(format!(
                "transpose shape {shape:?} (capacity {capacity}) is not a {}x{} tile grid \
                 of i32-sized extents",
                fwd.block_m(),
                fwd.block_n()
            )));
        }
        let aligned = [
            (b.words, 16),
            (b.q_words, 16),
            (b.classes, 1),
            (b.tile_word, 4),
            (b.partial_source, 4),
            (b.partial_count, 4),
            (b.tile_order, 4),
        ];
        if !b.forward.aligned()
            || !b.transposed.aligned()
            || aligned.iter().any(|&(p, a)| p == 0 || p % a != 0)
        {
            return Err(Error::InvalidArgument(
                "transpose buffers must be non-null, words 16-byte aligned, lists 4-byte \
                 aligned"
                    .into(),
            ));
        }
        let rows = shape.rows() as i32;
        let q_rows = (shape.planes * shape.n_blocks) as i32;
        let (mb, nb) = (shape.m_blocks as i32, shape.n_blocks as i32);
        let capacity = capacity as i32;
        let warps_per_cta = CLASSES_THREADS / 32;
        let args = [
            KernelArg::new(&b.forward.num_blocks),
            KernelArg::new(&b.forward.indices),
            KernelArg::new(&b.forward.full_num_blocks),
            KernelArg::new(&b.forward.full_indices),
            KernelArg::new(&b.forward.tile_offsets),
            KernelArg::new(&rows),
            KernelArg::new(&nb),
            KernelArg::new(&b.classes),
            KernelArg::new(&b.tile_word),
        ];
        // SAFETY: `fragmask_pack_classes(const int* x5, int rows, int nb, u8* classes,
        // int* tile_word)`: a warp per row below `rows` reads that row's `nb` list
        // entries (counts clamped to 0..nb) and writes classes and tile_word entries of
        // the row only, at listed blocks in 0..nb: inside the `tiles` entries.
        unsafe {
            launch_row(
                stream,
                &self.classes,
                (rows as u32).div_ceil(warps_per_cta),
                CLASSES_THREADS,
                &args,
                "launching the transposed class kernel",
            )?
        };
        let args = [
            KernelArg::new(&b.classes),
            KernelArg::new(&q_rows),
            KernelArg::new(&mb),
            KernelArg::new(&nb),
            KernelArg::new(&b.transposed.num_blocks),
            KernelArg::new(&b.transposed.indices),
            KernelArg::new(&b.transposed.full_num_blocks),
            KernelArg::new(&b.transposed.full_indices),
            KernelArg::new(&b.transposed.tile_offsets),
            KernelArg::new(&b.partial_source),
            KernelArg::new(&b.partial_count),
        ];
        // SAFETY: `fragmask_pack_lists_t(const u8* classes, int rows, int mb, int nb,
        // int* ...)`: one CTA reads the `rows * mb = tiles` classes and writes `rows`
        // counts, `rows * mb` list entries, at most `tiles` partial sources and one
        // count: the buffers' sizes.
        unsafe {
            launch_row(
                stream,
                &self.lists,
                1,
                LIST_THREADS,
                &args,
                "launching the transposed list kernel",
            )?
        };
        // SAFETY: the counts are the `q_rows = planes * n_blocks` the list kernel wrote
        // (earlier on `stream`); `tile_order` holds `q_rows`.
        unsafe {
            launch_order(
                stream,
                &self.tile_order,
                b.transposed,
                shape.planes,
                shape.n_blocks,
                b.tile_order,
                "launching the transposer's tile-order kernel",
            )?
        };
        let args = [
            KernelArg::new(&b.words),
            KernelArg::new(&b.tile_word),
            KernelArg::new(&b.partial_source),
            KernelArg::new(&b.partial_count),
            KernelArg::new(&capacity),
            KernelArg::new(&b.q_words),
        ];
        // SAFETY: `fragmask_pack_transcode(const u32* words, const int* tile_word,
        // const int* source, const int* count, int capacity, u32* q_words)`: tiles
        // p < min(count, capacity) read forward tile tile_word[source[p]] (skipped unless
        // below `capacity`) and write q_words tile p; both hold `capacity` tiles.
        // partial_source entries are tiles below `tiles` (the list kernel's), and
        // tile_word is written for every partial tile.
        unsafe {
            launch_row(
                stream,
                &self.transcode,
                self.transcode_blocks.min(capacity.max(1) as u32),
                self.kernels.threads(),
                &args,
                "launching the transcode kernel",
            )
        }
    }

    /// Waits for the stream and copies the transposed lists and words back.
    pub fn download(&self, buffers: &TransposeBuffers) -> Result<GpuTransposed> {
        let s = &self.stream;
        let shape = buffers.shape;
        let count = read_i32s(s, &buffers.partial_count, 1, "reading transposed lists")?[0];
        let count = usize::try_from(count)
            .ok()
            .filter(|&c| c <= buffers.capacity)
            .ok_or_else(|| Error::InvalidArgument(format!("transposed partial count {count}")))?;
        let mut words = s
            .clone_dtoh(&buffers.q_words)
            .map_err(Error::driver("reading transposed words"))?;
        words.truncate(count * self.words_per_tile());
        let q_rows = shape.planes * shape.n_blocks;
        let out = GpuTransposed {
            lists: buffers
                .lists
                .download(s, ListDirection::Transposed, q_rows, shape.m_blocks)?,
            words,
            tile_order: read_i32s(s, &buffers.tile_order, q_rows, "reading the tile order")?,
        };
        s.synchronize()
            .map_err(Error::driver("running the transposed-list kernels"))?;
        Ok(out)
    }

    /// Adds the transposed lists to a host mask on the GPU: uploads its forward lists
    /// and words, runs the kernels, downloads and attaches the result (validated as a
    /// file's). The mask's tile must be the transposer's forward tile and its words
    /// FragmentNative.
    pub fn add_transposed(&self, mask: &mut PackedMask) -> Result<()> {
        if mask.accumulator() != self.forward() || mask.encoding() != Encoding::FragmentNative {
            return Err(Error::InvalidArgument(format!(
                "the transposer packs {:?} fragment-native tiles, the mask has {:?} {}",
                self.forward(),
                mask.accumulator(),
                mask.encoding().name()
            )));
        }
        let s = &self.stream;
        let sh = mask.shape();
        let shape = PackShape {
            planes: sh.batch * sh.heads,
            seqlen_q: sh.seqlen_q,
            seqlen_k: sh.seqlen_k,
            m_blocks: mask.grid().m_blocks,
            n_blocks: mask.grid().n_blocks,
        };
        let forward = DeviceBlockLists::upload(s, mask.lists())
            .map_err(Error::driver("uploading mask lists"))?;
        let words = if mask.words().is_empty() {
            s.alloc_zeros::<u32>(4)
        } else {
            s.clone_htod(mask.words())
        }
        .map_err(Error::driver("uploading mask words"))?;
        let mut out = self.buffers(shape, mask.partial_tiles())?;
        {
            let (forward, _a) = forward.raw(s);
            let (w, _f) = words.device_ptr(s);
            // SAFETY: the inputs are copies of a validated PackedMask's lists (of
            // `shape`) and its `partial_tiles()` tiles of words (`out`'s capacity),
            // borrowed until the launches are enqueued; the stream orders the uploads
            // before them.
            unsafe { self.enqueue_into(forward, w, &mut out)? };
        }
        let (lists, q_words) = self.download(&out)?.into_parts();
        mask.attach_transposed(self.backward(), lists, q_words)
            .map_err(|e| Error::InvalidArgument(format!("the GPU's transposed lists: {e}")))
    }
}

/// Launches an order kernel (`fragmask_kernels::packer::order_kernel`) over the counts of
/// `lists` (`planes * rows` rows), writing `planes * rows` entries at `order`.
///
/// # Safety
/// `func` must be an order kernel; `lists`' counts must hold `planes * rows` i32 written
/// before this call on `stream`, and `order` as many writable i32, all live until the
/// kernel has run.
unsafe fn launch_order(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    lists: RawBlockLists,
    planes: usize,
    rows: usize,
    order: u64,
    what: &'static str,
) -> Result<()> {
    let (planes_i, rows_i) = (planes as i32, rows as i32);
    let args = [
        KernelArg::new(&lists.num_blocks),
        KernelArg::new(&lists.full_num_blocks),
        KernelArg::new(&planes_i),
        KernelArg::new(&rows_i),
        KernelArg::new(&order),
    ];
    let grid = (
        (rows as u32).div_ceil(ORDER_THREADS).max(1),
        (planes as u32).clamp(1, MAX_GRID_Y),
        1,
    );
    // SAFETY: `(const int* counts, const int* full_counts, int planes, int rows, int*
    // order)`: reads `planes * rows` counts of each list and writes each plane's `rows`
    // order entries (ranks below rows), as this function's contract provides.
    unsafe { launch(stream, func, Launch::new(grid, ORDER_THREADS), &args) }
        .map_err(Error::driver(what))
}

/// Launches `func` on `stream` as one row of `blocks` blocks of `threads` threads with
/// `args`; a failure names `what`.
///
/// # Safety
/// As [`launch`]'s for that shape: `args` match the kernel's parameters, every address
/// in them is valid for what the kernel reads and writes until it has run on `stream`,
/// and `blocks` and `threads` are within the function's limits.
unsafe fn launch_row(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    blocks: u32,
    threads: u32,
    args: &[KernelArg<'_>],
    what: &'static str,
) -> Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { launch(stream, func, Launch::new((blocks, 1, 1), threads), args) }
        .map_err(Error::driver(what))
}
