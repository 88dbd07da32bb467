//! Compiling the generated attention kernels to sm_90a cubins, with ptxas' resource
//! report ([`crate::ptxas`]; no GPU needed). The SASS of a [`CompiledKernel`] is read by
//! `fragmask-check`'s SASS inspection.

use fragmask_kernels::attention::{AttentionKernel, KERNEL_NAME};

use super::AttentionError;
use crate::nvrtc::{Arch, CompileOptions, Compiler};
use crate::ptxas;

/// A compiled attention kernel with its resource report.
#[derive(Debug, Clone)]
pub struct CompiledKernel {
    /// The configuration it was generated from.
    pub config: AttentionKernel,
    /// The generated CUDA source.
    pub source: String,
    /// The sm_90a cubin.
    pub cubin: Vec<u8>,
    /// NVRTC / ptxas log (the `-v` resource report included).
    pub log: String,
    /// Registers per thread at entry, from ptxas' report (0 if not reported).
    pub registers: u32,
    /// Spill stores + spill loads in bytes, from ptxas' report.
    pub spill_bytes: u32,
    /// Stack frame bytes.
    pub stack_bytes: u32,
}

/// Generates and compiles `config` for sm_90a through the on-disk NVRTC cache.
pub fn compile_kernel(config: &AttentionKernel) -> Result<CompiledKernel, AttentionError> {
    compile_kernel_with(&Compiler::new(), config)
}

/// As [`compile_kernel`] with an explicit compiler (cache location).
pub fn compile_kernel_with(
    compiler: &Compiler,
    config: &AttentionKernel,
) -> Result<CompiledKernel, AttentionError> {
    let source = config.source().map_err(AttentionError::Config)?;
    let options = CompileOptions::new(Arch::sm90a());
    let cubin = compiler
        .compile_cubin(&source, &options)
        .map_err(AttentionError::Host)?;
    let report = ptxas::parse_ptxas_log(&cubin.log)
        .remove(KERNEL_NAME)
        .unwrap_or_default();
    Ok(CompiledKernel {
        config: *config,
        source,
        cubin: cubin.bytes,
        log: cubin.log,
        registers: report.registers.unwrap_or(0),
        spill_bytes: report.spill_store_bytes.unwrap_or(0) + report.spill_load_bytes.unwrap_or(0),
        stack_bytes: report.stack_frame_bytes.unwrap_or(0),
    })
}
