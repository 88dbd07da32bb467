//! fragmask: proven MMA fragment maps, fragment-native attention masks and the
//! CUDA kernels that consume them.
//!
//! This root crate re-exports the workspace crates in data-flow order:
//! layout → gmma-frag → masks → kernels → host → check. With the default `cli` feature it
//! also holds the command line's input readers ([`inputs`]).

#[cfg(feature = "cli")]
pub use fragmask_check as check;
pub use fragmask_gmma_frag as gmma_frag;
pub use fragmask_host as host;
pub use fragmask_kernels as kernels;
pub use fragmask_layout as layout;
pub use fragmask_masks as masks;
pub mod calc;
#[cfg(feature = "cli")]
pub mod inputs;
