//! One direction's tile lists on the device ([`DeviceBlockLists`]) and their device
//! addresses ([`RawBlockLists`]): the forward lists (`kv_*`) and the backward's
//! transposed lists (`q_*`) alike, as [`BlockLists`] holds them on the host.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError, SyncOnDrop};
use fragmask_masks::{BlockLists, ListDirection};

/// Device addresses of one direction's five lists, in [`BlockLists::parts`]' order
/// (counts, indices, full counts, full indices, tile offsets), each i32 and 4-byte
/// aligned: `[rows]` counts and `[rows, row_len]` entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawBlockLists {
    /// Partial tiles per row (`kv_num_blocks` / `q_num_blocks`).
    pub num_blocks: u64,
    /// Their blocks (`kv_indices` / `q_indices`).
    pub indices: u64,
    /// Full tiles per row (`full_kv_num_blocks` / `full_q_num_blocks`).
    pub full_num_blocks: u64,
    /// Their blocks (`full_kv_indices` / `full_q_indices`).
    pub full_indices: u64,
    /// Partial tiles' indices into the words (`kv_tile_offsets` / `q_tile_offsets`).
    pub tile_offsets: u64,
}

impl RawBlockLists {
    /// The five addresses from an array in [`BlockLists::parts`]' order.
    pub fn from_array(
        [num_blocks, indices, full_num_blocks, full_indices, tile_offsets]: [u64; 5],
    ) -> Self {
        Self {
            num_blocks,
            indices,
            full_num_blocks,
            full_indices,
            tile_offsets,
        }
    }

    /// The five addresses in [`BlockLists::parts`]' order.
    pub fn to_array(&self) -> [u64; 5] {
        [
            self.num_blocks,
            self.indices,
            self.full_num_blocks,
            self.full_indices,
            self.tile_offsets,
        ]
    }

    /// Whether every address is non-null and 4-byte aligned.
    pub fn aligned(&self) -> bool {
        self.to_array().iter().all(|&p| p != 0 && p % 4 == 0)
    }
}

/// Device addresses of a mask's lists in one direction ([`RawBlockLists`]) and of the
/// FragmentNative words their tile offsets index (4-byte aligned `u32` words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawMaskLists {
    /// The five lists.
    pub lists: RawBlockLists,
    /// The partial tiles' words.
    pub words: u64,
    /// The i32 count of partial tiles that the GPU packer or transposer wrote beside lists it
    /// built (0: none). Given only for such lists, whose count the host has not read: they
    /// number their partial tiles in row order, so a count of every tile of the grid means
    /// dense lists, and the plan runs a kernel that computes their entries where the count
    /// says so when it runs (`ListEntries::DenseAtRunTime` in fragmask-kernels; docs/masks.md,
    /// "Dense tile lists").
    pub partial_count: u64,
    /// Transposed lists only: the device address of their key tiles' dispatch order, i32
    /// `[planes, n_blocks]` as `fragmask_masks::tile_order` computes it (0: none; a plan
    /// then orders host-held lists itself and leaves lists held only on the device in
    /// index order). The GPU transposer writes it beside the lists it builds.
    pub tile_order: u64,
}

impl RawMaskLists {
    /// From six addresses: the five lists in [`BlockLists::parts`]' order, then the
    /// words (FlexAttention's `kv_num_blocks, kv_indices, full_kv_num_blocks,
    /// full_kv_indices`, then `kv_tile_offsets` and the words).
    pub fn from_array([a, b, c, d, e, words]: [u64; 6]) -> Self {
        Self {
            lists: RawBlockLists::from_array([a, b, c, d, e]),
            words,
            partial_count: 0,
            tile_order: 0,
        }
    }

    /// The same lists with the GPU packer's partial-tile count at `count`
    /// ([`Self::partial_count`]).
    pub fn with_partial_count(self, count: u64) -> Self {
        Self {
            partial_count: count,
            ..self
        }
    }

    /// The same (transposed) lists with their dispatch order at `order`
    /// ([`Self::tile_order`]).
    pub fn with_tile_order(self, order: u64) -> Self {
        Self {
            tile_order: order,
            ..self
        }
    }
}

/// One direction's five lists in device memory (each at least one element: the driver
/// refuses empty allocations).
#[derive(Debug)]
pub struct DeviceBlockLists {
    num_blocks: CudaSlice<i32>,
    indices: CudaSlice<i32>,
    full_num_blocks: CudaSlice<i32>,
    full_indices: CudaSlice<i32>,
    tile_offsets: CudaSlice<i32>,
}

impl DeviceBlockLists {
    /// Zeroed lists of `rows` counts and `entries` entries, for kernels to fill.
    pub fn alloc(
        stream: &Arc<CudaStream>,
        rows: usize,
        entries: usize,
    ) -> Result<Self, DriverError> {
        let alloc = |n: usize| stream.alloc_zeros::<i32>(n.max(1));
        Ok(Self {
            num_blocks: alloc(rows)?,
            indices: alloc(entries)?,
            full_num_blocks: alloc(rows)?,
            full_indices: alloc(entries)?,
            tile_offsets: alloc(entries)?,
        })
    }

    /// A copy of `lists` on the device.
    pub fn upload(stream: &Arc<CudaStream>, lists: &BlockLists) -> Result<Self, DriverError> {
        let up = |v: &[i32]| stream.clone_htod(if v.is_empty() { &[0][..] } else { v });
        let [num_blocks, indices, full_num_blocks, full_indices, tile_offsets] = lists.parts();
        Ok(Self {
            num_blocks: up(num_blocks)?,
            indices: up(indices)?,
            full_num_blocks: up(full_num_blocks)?,
            full_indices: up(full_indices)?,
            tile_offsets: up(tile_offsets)?,
        })
    }

    /// The device addresses for kernels that read the lists, and the guards that keep
    /// cudarc's stream-order tracking of each list until they are dropped (after the
    /// launches are enqueued).
    pub fn raw<'a>(&'a self, stream: &'a CudaStream) -> (RawBlockLists, [SyncOnDrop<'a>; 5]) {
        split_guards([
            self.num_blocks.device_ptr(stream),
            self.indices.device_ptr(stream),
            self.full_num_blocks.device_ptr(stream),
            self.full_indices.device_ptr(stream),
            self.tile_offsets.device_ptr(stream),
        ])
    }

    /// As [`Self::raw`], for kernels that write the lists.
    pub fn raw_mut<'a>(
        &'a mut self,
        stream: &'a CudaStream,
    ) -> (RawBlockLists, [SyncOnDrop<'a>; 5]) {
        split_guards([
            self.num_blocks.device_ptr_mut(stream),
            self.indices.device_ptr_mut(stream),
            self.full_num_blocks.device_ptr_mut(stream),
            self.full_indices.device_ptr_mut(stream),
            self.tile_offsets.device_ptr_mut(stream),
        ])
    }

    /// Copies the first `rows` counts and `rows × row_len` entries back (waits for
    /// `stream`) as [`BlockLists`] of `direction`; contents are not validated.
    pub fn download(
        &self,
        stream: &Arc<CudaStream>,
        direction: ListDirection,
        rows: usize,
        row_len: usize,
    ) -> crate::Result<BlockLists> {
        let get = |d: &CudaSlice<i32>, n: usize| read_i32s(stream, d, n, "reading tile lists");
        let entries = rows * row_len;
        let lists = [
            get(&self.num_blocks, rows)?,
            get(&self.indices, entries)?,
            get(&self.full_num_blocks, rows)?,
            get(&self.full_indices, entries)?,
            get(&self.tile_offsets, entries)?,
        ];
        BlockLists::new(direction, rows, row_len, lists).map_err(|e| {
            crate::Error::InvalidArgument(format!("tile lists read back from the device: {e}"))
        })
    }
}

/// The five lists' addresses (in [`BlockLists::parts`]' order) apart from the guards
/// that `device_ptr` / `device_ptr_mut` returned with them.
fn split_guards(parts: [(u64, SyncOnDrop<'_>); 5]) -> (RawBlockLists, [SyncOnDrop<'_>; 5]) {
    let [(a, g0), (b, g1), (c, g2), (d, g3), (e, g4)] = parts;
    (
        RawBlockLists::from_array([a, b, c, d, e]),
        [g0, g1, g2, g3, g4],
    )
}

/// The first `n` values of `slice`, copied to the host on `stream`; a failure names
/// `what`.
pub(crate) fn read_i32s(
    stream: &Arc<CudaStream>,
    slice: &CudaSlice<i32>,
    n: usize,
    what: &'static str,
) -> crate::Result<Vec<i32>> {
    let mut values = stream
        .clone_dtoh(slice)
        .map_err(crate::Error::driver(what))?;
    values.truncate(n);
    Ok(values)
}
