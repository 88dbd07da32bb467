//! fragmask's host runtime: the library a host application and the Python extension
//! link to compile and launch the generated CUDA kernels.
//!
//! - [`toolchain`]: find NVRTC and the CUDA binary tools; never panics when they are absent.
//! - [`device`]: GPU discovery with clear "no CUDA driver found" / "no CUDA device" errors.
//! - [`nvrtc`]: CUDA C++ to cubin or PTX through NVRTC, with an on-disk [`cache`];
//!   [`ptxas`] reads the resource report NVRTC leaves in the log.
//! - [`launch`]: the one launch mechanism of every family (`cuLaunchKernelEx` with
//!   programmatic dependent launch and cluster attributes), and typed wrappers.
//! - [`module_cache`]: each kernel module loaded once per context and process, for
//!   every family.
//! - [`attention`], [`decode`], [`lightning`]: one plan/run path per kernel family;
//!   [`gpu_packer`]: the mask packers on the GPU.
//!
//! Checking code (CPU references, selftests, hardware verification, benchmarks, SASS
//! inspection, the emulator) lives beside the runtime in `fragmask-check`
//! (docs/architecture.md, "Checking code beside the runtime").
//!
//! The library prints nothing; every failure is an [`Error`].
#![warn(missing_docs)]

pub mod attention;
pub mod cache;
pub mod decode;
pub mod device;
pub mod device_lists;
mod error;
pub mod gpu_packer;
pub mod launch;
pub mod lightning;
pub mod merge;
pub mod module_cache;
pub mod nvrtc;
pub mod ptxas;
pub mod toolchain;

pub use cudarc;
pub use device::{ComputeCapability, Device};
pub use error::{Error, Result};
pub use fragmask_kernels as kernels;
pub use nvrtc::{Arch, CompileOptions, Compiler, Cubin, Ptx};
