//! CUDA C++ source generated for fragmask.
//!
//! Everything this crate emits is *header-free*: NVRTC has no default include
//! path (docs/architecture.md, fact 8), so the generated code brings its own
//! `bf16` typedef (`unsigned short` bit patterns), talks to the hardware through
//! raw `asm volatile` PTX and never uses `#include`.
//!
//! This crate only produces source text; compiling and launching it is the job
//! of `fragmask-host`, which depends on this crate (never the other way round).
//!
//! Modules:
//! - [`probe`]: hardware probe kernels that reveal which thread holds which
//!   element of the wgmma accumulator and of the mma.sync A/B/C fragments.
//! - [`cuda`]: small shared snippets of generated CUDA (typedefs, PTX helpers).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apply;
pub mod attention;
pub mod cuda;
pub mod decode;
pub mod emit;
mod error;
pub mod family;
pub mod lightning;
pub mod packer;
pub mod probe;

pub use error::Error;
