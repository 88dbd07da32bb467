//! Compiling the generated attention kernels to sm_90a cubins, with ptxas' resource
//! report and the SASS read through [`crate::sass`] (no GPU needed).

use fragmask_kernels::attention::{AttentionKernel, KERNEL_NAME};

use super::AttentionError;
use crate::nvrtc::{Arch, CompileOptions, Compiler};
use crate::sass::{self, KernelSass};

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

impl CompiledKernel {
    /// The kernel's SASS (`cuobjdump -sass` and `-res-usage`, with ptxas' report from
    /// the log), through [`sass::inspect_bytes`].
    pub fn sass(&self) -> Result<KernelSass, AttentionError> {
        let report = sass::inspect_bytes(&self.cubin).map_err(AttentionError::Host)?;
        let mut kernel = report
            .kernels
            .into_iter()
            .find(|k| k.name == KERNEL_NAME)
            .ok_or_else(|| {
                AttentionError::Host(crate::Error::Parse {
                    what: "cuobjdump -sass output",
                    detail: format!("no function {KERNEL_NAME} in the attention cubin"),
                })
            })?;
        kernel.ptxas = sass::parse_ptxas_log(&self.log).remove(KERNEL_NAME);
        Ok(kernel)
    }

    /// The SASS text of the cubin ([`sass::disassemble`]).
    pub fn sass_text(&self) -> Result<String, AttentionError> {
        sass::disassemble(&self.cubin).map_err(AttentionError::Host)
    }
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
    let report = sass::parse_ptxas_log(&cubin.log)
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
