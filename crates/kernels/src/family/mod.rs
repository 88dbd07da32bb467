//! Components shared by the kernels of the attention family (docs/architecture.md):
//! each is a small piece that emits CUDA and knows which layout or field list it
//! comes from. A new kernel is assembled from these, not copied from another kernel.
//!
//! - [`abi`]: a kernel's parameter struct, declared once in Rust and emitted for CUDA,
//!   with the offsets checked on both sides.
//! - [`combine`]: the LSE merge of partial results (split-KV decode's combine).
//! - [`dtype`]: the element types of activations, and their load/store helpers.
//! - [`ptx`]: PTX helpers (mbarrier, TMA, wgmma, named barriers, exp2/log2), defined once.
//! - [`template`]: the checked `$NAME` placeholder pass of text templates.

pub mod abi;
pub mod combine;
pub mod dtype;
pub mod ptx;
pub mod template;
