//! fragmask's host runtime: compile, inspect, launch, time and verify CUDA kernels.
//!
//! - [`toolchain`]: find NVRTC and the CUDA binary tools; never panics when they are absent.
//! - [`device`]: GPU discovery with clear "no CUDA driver found" / "no CUDA device" errors.
//! - [`nvrtc`]: CUDA C++ to cubin or PTX through NVRTC, with an on-disk [`cache`].
//! - [`sass`]: disassemble a cubin with `cuobjdump` and summarise registers,
//!   local memory (spills) and instruction counts.
//! - [`launch`]: typed wrappers for launching loaded kernels.
//! - [`timing`]: CUDA-event timing with warm-up and robust statistics.
//! - [`verify`]: run the hardware probes of `fragmask-kernels` and compare every
//!   register of every thread against an expected fragment layout.
//!
//! The library prints nothing; every failure is an [`Error`].
#![warn(missing_docs)]

pub mod apply_bench;
pub mod attention;
pub mod cache;
pub mod decode;
pub mod device;
pub mod emulator;
mod error;
pub mod gpu_packer;
pub mod launch;
pub mod lightning;
pub mod limits;
pub mod nvrtc;
pub mod sass;
pub mod timing;
pub mod toolchain;
pub mod verify;

pub use cudarc;
pub use device::{ComputeCapability, Device};
pub use error::{Error, Result};
pub use fragmask_kernels as kernels;
pub use nvrtc::{Arch, CompileOptions, Compiler, Cubin, Ptx};
