//! fragmask's checking code, beside the runtime (`fragmask-host`) rather than in it
//! (docs/architecture.md, "Checking code beside the runtime"): what proves and measures
//! the kernels, never what a host application or the Python extension links.
//!
//! - [`attention`], [`decode`], [`lightning`]: the CPU f64 references, the GPU
//!   selftests against them and the benchmarks of each kernel family.
//! - [`verify`]: hardware truth; the probes of `fragmask_kernels::probe` compared
//!   register by register with the fragment layouts, the mask-apply and packer checks.
//! - [`apply_bench`]: the mask-apply cost benchmark (SASS loop bodies and timings).
//! - [`sass`]: `cuobjdump` inspection of a cubin (registers, spills, instruction counts).
//! - [`emulator`]: a CPU emulator of the generated mask-apply functions; [`compare`]:
//!   where a GPU-packed mask first differs from the CPU packer's.
//! - [`timing`]: CUDA-event timing with warm-up and robust statistics.
//! - [`random`], [`synthetic`], [`limits`]: deterministic inputs of the checks and their
//!   host-memory budget; [`numeric`]: bf16 / f16 conversions of inputs and results.
//!
//! Everything runs through the runtime's public plan/run API. The library prints
//! nothing; failures are the runtime's typed errors.
#![warn(missing_docs)]

pub mod apply_bench;
pub mod attention;
pub mod compare;
pub mod decode;
pub mod emulator;
pub mod lightning;
pub mod limits;
pub mod numeric;
pub mod random;
pub mod sass;
pub mod synthetic;
pub mod timing;
pub mod verify;

#[cfg(test)]
#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;
