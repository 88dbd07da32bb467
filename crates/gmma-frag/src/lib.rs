//! Thread-value (TV) layouts of NVIDIA MMA atoms, built with `fragmask-layout` and
//! proven by the tests in `tests/`.
//!
//! - [`WgmmaAccumulator`]: the SM90 `wgmma` m64nNk16 f32 accumulator, every legal N.
//! - [`TiledAccumulator`]: that atom tiled over a FlashAttention-3 `block_m × block_n`
//!   tile with 1–3 warpgroups, optionally SwapAB; `coord` / `owner` queries.
//!
//! ```
//! use fragmask_gmma_frag::TiledAccumulator;
//! const ACC: TiledAccumulator = match TiledAccumulator::new(128, 128, 2, false) {
//!     Ok(a) => a,
//!     Err(_) => panic!("bad config"),
//! };
//! static_assertions::const_assert_eq!(ACC.values_per_thread(), 64);
//! ```
#![no_std]
#![deny(missing_docs)]

mod error;
mod rs_a;
mod sm80;
mod smem;
mod tiled;
mod util;
mod wgmma;

pub use error::FragError;
pub use rs_a::{rs_a16_slot, rs_a8_slot, ASlot, A16_LAYOUT, A8_LAYOUT, FP8_K_PERMUTATION};
pub use sm80::{
    Sm80TiledAccumulator, MAX_WARPS, SM80_A_LAYOUT, SM80_B_LAYOUT, SM80_C_LAYOUT, WARP_THREADS,
};
pub use smem::{kmajor_interleaved_layout, GmmaDescriptor, Major, SmemAtom, SmemSwizzle};
pub use tiled::{
    quad, quad_lane, warp, warp_in_warpgroup, warpgroup, IndexList, TiledAccumulator,
    INDEX_LIST_CAPACITY,
};
pub use wgmma::{is_legal_n, WgmmaAccumulator, ATOM_M, WARPGROUP_THREADS};

/// Most MMA warpgroups a [`TiledAccumulator`] may have.
pub const MAX_WARPGROUPS: u32 = 3;
/// Largest `block_m` and `block_n` a [`TiledAccumulator`] accepts.
pub const MAX_TILE_EXTENT: u32 = 1024;
