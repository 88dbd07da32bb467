//! fragmask: proven MMA fragment maps, fragment-native attention masks and the
//! CUDA kernels that consume them.
//!
//! This root crate re-exports the workspace crates in data-flow order:
//! layout → gmma-frag → masks → kernels → host.

pub use fragmask_gmma_frag as gmma_frag;
pub use fragmask_host as host;
pub use fragmask_kernels as kernels;
pub use fragmask_layout as layout;
pub use fragmask_masks as masks;
pub mod calc;
