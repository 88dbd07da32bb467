//! Attention masks for wgmma kernels: sources → exact tile classification → the bits of
//! each partial tile in the order each thread consumes them.
//!
//! 1. **Sources** ([`MaskSource`]): a bool per `(batch, head, q, k)`, broadcast over
//!    batch and head. [`DenseMask`] (bytes), [`TopKMask`] (per-query key lists, CSR or
//!    fixed-k), [`BlockSparseMask`] (`q2k_block_sparse_index` / `_num` /
//!    `variable_block_sizes`), [`PredicateMask`] (causal, sliding window, prefix-LM,
//!    documents, and / or / not).
//! 2. **Classification** ([`pack`]): per `(batch, head, m_block)` the partial and the
//!    full `n_block`s, ascending, in FlexAttention's BlockMask form (`kv_num_blocks`,
//!    `kv_indices`, `full_kv_num_blocks`, `full_kv_indices`), a [`BlockLists`].
//!    Empty tiles are in neither; a ragged edge tile is never full. On request
//!    ([`pack_transposed`], [`PackedMask::add_transposed`]) also the backward pass's
//!    transposed lists (`q_num_blocks`, `q_indices`, `full_q_num_blocks`,
//!    `full_q_indices`, per `(batch, head, n_block)`): a [`BlockLists`] of the other
//!    [`ListDirection`], in [`TransposedLists`].
//! 3. **Encodings** ([`Encoding`]) of the partial tiles, all derived from
//!    [`TiledAccumulator::coord`](fragmask_gmma_frag::TiledAccumulator::coord):
//!    FragmentNative (default: one coalesced load per thread per tile), QuadLane and
//!    RowMajor, each with a decoder. The transposed tiles are FragmentNative over the
//!    backward's own accumulator (normally SwapAB: `Sᵀ = K Qᵀ`).
//! 4. **Files** ([`io`], `std`): `.npy` / safetensors in, a safetensors file PyTorch
//!    loads out (docs/masks.md).
//!
//! Memory is proportional to the partial tiles (plus the lists), never to `Sq × Sk`
//! unless the source itself is dense.
//!
//! ```
//! use fragmask_gmma_frag::TiledAccumulator;
//! use fragmask_masks::{pack, Encoding, MaskShape, PackOptions, TopKMask};
//!
//! // Every query keeps 3 keys of 1024.
//! let shape = MaskShape::new(1, 1, 256, 1024).unwrap();
//! let keys: Vec<i32> = (0..256).flat_map(|q| [q, q + 300, 1023]).collect();
//! let topk = TopKMask::from_fixed_k(shape, 3, &keys).unwrap();
//! let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
//! for encoding in Encoding::ALL {
//!     let packed = pack(&topk, &acc, encoding, &PackOptions::default()).unwrap();
//!     let stats = packed.stats();
//!     assert_eq!((stats.partial + stats.empty, stats.full, stats.ones), (16, 0, 768));
//!     assert!(packed.get(0, 0, 7, 307) && !packed.get(0, 0, 7, 308));
//! }
//! ```
//!
//! Features: without `alloc` the crate offers the encodings' bit positions, the bit
//! helpers and [`DenseMask`]; `alloc` adds the owned sources, tables and the
//! single-threaded packer; `std` (default) adds threads and file I/O.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod bits;
#[cfg(feature = "alloc")]
mod dispatch;
mod documents;
mod encoding;
mod error;
#[cfg(feature = "alloc")]
mod fused;
#[cfg(feature = "std")]
pub mod io;
#[cfg(feature = "alloc")]
mod lists;
#[cfg(feature = "alloc")]
mod pack;
#[cfg(feature = "alloc")]
mod plan;
mod shape;
mod source;
#[cfg(feature = "alloc")]
mod transpose;
#[cfg(feature = "alloc")]
mod walks;
#[cfg(feature = "std")]
mod workers;

#[cfg(feature = "alloc")]
pub use dispatch::{is_index_order, is_last_row_first, row_order, tile_order};
#[cfg(feature = "alloc")]
pub use documents::{DocumentKind, Documents};
#[cfg(feature = "alloc")]
pub use encoding::EncodedLayout;
pub use encoding::{
    mma_cols, mma_rows, words_per_quad, words_per_thread, Encoding, LoadCost, WordShape,
};
pub use error::MaskError;
#[cfg(feature = "alloc")]
pub use lists::{BlockLists, ListDirection};
#[cfg(feature = "alloc")]
pub use pack::{
    pack, pack_transposed, plain_bit_pack, ByteStats, PackOptions, PackProgress, PackedMask,
    TileClass, TileStats, MAX_SEQLEN, MAX_THREADS, MAX_TILE_COUNT,
};
#[cfg(feature = "alloc")]
pub use plan::{TilePlan, Transcoder};
pub use shape::{MaskShape, TileGrid};
#[cfg(feature = "alloc")]
pub use source::BlockSparseOptions;
#[cfg(feature = "alloc")]
pub use source::{
    parse_predicate, Alignment, BlockSparseMask, DocumentIds, Predicate, PredicateMask, TopKMask,
    MAX_PREDICATE_DEPTH, MAX_PREDICATE_NESTING,
};
pub use source::{DenseMask, DenseRows, IndexValue, MaskSource, Region};
pub use transpose::{TransposedLists, TRANSPOSED_ENCODING};
#[cfg(feature = "alloc")]
pub use walks::{deterministic_walks, DeterministicWalks, PlaneWalker};

pub use fragmask_gmma_frag::TiledAccumulator;
