//! Lightning attention decode (MiniMax-01's linear attention; the write-up's
//! `lightning_attention_decode`): for each token `t` of `n`, in order,
//!
//! ```text
//! kv ← exp(−slope_h) · kv + k_tᵀ v_t        kv: [B, H, D, E] fp32, updated in place or copied
//! o_t = q_t · kv                            q, k: [B, H, n, D]; v, o: [B, H, n, E]
//! ```
//!
//! A memory-bound read-modify-write of the state (each element read once and written
//! once). The kernel is assembled from the family's components (docs/architecture.md):
//! - [`LightningConfig`] is the geometry: every number in the source comes from it;
//! - [`StateTiling`] is the tiling of the state, a thread–value layout from which every
//!   in-tile index is emitted ([`crate::emit::layout_offset`]);
//! - [`LightningParams`] is the ABI, one field list for CUDA and Rust
//!   ([`crate::abi_struct!`]);
//! - [`source`] emits the producer (vector loads of the state), the consumer (decay,
//!   rank-1 update, `q · kv` partials) and the epilogue (row reduction, o, the state).

mod config;
mod problem;
pub mod source;
mod tiling;

pub use config::{ConfigError, LightningConfig};
pub use problem::{
    LightningProblem, ProblemError, MAX_BATCH, MAX_DEVICE_BYTES, MAX_HEADS, MAX_TOKENS,
};
pub use source::{LightningParams, KERNEL_NAME};
pub use tiling::StateTiling;
