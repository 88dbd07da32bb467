//! Split-KV decode over a contiguous or paged KV cache (issue 11): a member of the
//! attention kernel family (docs/architecture.md §3, docs/decode.md).
//!
//! ```text
//! o[b, t, h] = softmax(scale · q[b, t, h] · K[b, :, h / G]ᵀ + mask) · V[b, :, h / G]
//! q, o: [B, Sq, H, D]    K, V: [B, Sk, Hkv, D] or pages [P, page_size, Hkv, D]    G = H / Hkv
//! ```
//!
//! Memory-bound: each key of the cache is read once per CTA of 16 packed query rows, or
//! of 64 with shared K/V stages ([`DecodeConfig::shared_kv`], docs/decode.md).
//! Assembled from the family's components:
//! - [`DecodeConfig`] is the geometry: every number in the source comes from it;
//! - [`operands`] holds the operand tilings, the contraction order and the shared-memory
//!   swizzles as layouts, with the proof that they feed `mma.sync.m16n8k16` (gmma-frag's
//!   SM80 fragments) consistent operands;
//! - [`DecodeParams`] is the ABI ([`crate::abi_struct!`]);
//! - [`crate::family::combine`] merges the warps' and the splits' partial results;
//! - [`source`] emits the scheduler, producer and epilogue; `tile` the consumer's step
//!   (QKᵀ, mask, the family's online softmax, PV).

mod config;
pub mod operands;
pub mod source;
mod tile;

pub use config::{
    ConfigError, DecodeConfig, KvLayout, CHUNK_BYTES, CLUSTER_MERGE, LIST_CAP, MAX_CLUSTER_SPLITS,
    MAX_MASK_BLOCK_N, MAX_PAGE_SIZE, SHARED_WARPS, TILE_KEYS, TILE_ROWS,
};
pub use source::{DecodeParams, COMBINE_KERNEL, COMBINE_THREADS, SPLIT_KERNEL};
