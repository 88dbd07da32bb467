//! Components shared by the kernels of the attention family (docs/architecture.md §3,
//! "Which components each kernel uses"): each is a small piece that emits CUDA, or a
//! number or layout the CUDA is derived from, and knows which layout or field list it
//! comes from. A kernel is assembled from these; no kernel imports another kernel's
//! pieces, and no kernel text is made by string replacement.
//!
//! - [`abi`]: a kernel's parameter struct, declared once in Rust and emitted for CUDA,
//!   with the offsets checked on both sides.
//! - [`combine`]: the LSE merge of partial results (split-KV forward and decode).
//! - [`dtype`]: the element types of activations, and their load/store helpers.
//! - [`epilogue`]: the staged epilogue (stmatrix into an owned operand tile, 16-byte rows out).
//! - [`fragment`]: index expressions of the wgmma accumulator, from its CuTe layout.
//! - [`mask`]: the mask apply of the wgmma kernels (window bounds or FragmentNative words).
//! - [`ptx`]: PTX helpers (mbarrier, TMA, bulk copies, cp.async, wgmma, mma.sync,
//!   named barriers, clusters, exp2/log2), defined once.
//! - [`schedule`]: which tiles a CTA visits (window, causal, listed blocks, their
//!   transposes), split-KV ranges and the largest-first orders.
//! - [`sm90`]: the SM limits every geometry is checked against.
//! - [`smem`]: wgmma operand tiles in shared memory, from gmma-frag layouts.
//! - [`softmax`]: the online softmax (base 2), parameterised by the fragment's rows.
//! - [`template`]: the checked `$NAME` placeholder pass of text templates.

pub mod abi;
pub mod combine;
pub mod dtype;
pub mod epilogue;
pub mod fragment;
pub mod mask;
pub mod ptx;
pub mod schedule;
pub mod sm90;
pub mod smem;
pub mod softmax;
pub mod template;

/// A layout that a component cannot use as it needs to (not canonical for a wgmma
/// descriptor, pairs not adjacent, ...): a generator bug or an unsupported shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError(pub String);

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LayoutError {}
