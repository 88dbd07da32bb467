//! Checking the attention kernels: the CPU references of the forward and the backward,
//! the GPU selftests against them, the split-KV benchmark, and timing and SASS helpers
//! over the runtime's prepared launches and compiled kernels.

pub mod backward_selftest;
pub mod reference;
pub mod selftest;
pub mod split_bench;

use fragmask_host::attention::backward::PreparedBackward;
use fragmask_host::attention::{AttentionError, CompiledKernel, PreparedLaunch};
use fragmask_kernels::attention::KERNEL_NAME;

use crate::sass::{self, KernelSass};
use crate::timing::{time_on_stream, Timing, TimingConfig};

/// Times `launch` between CUDA events as `config` says.
fn time_calls(
    stream: &std::sync::Arc<fragmask_host::cudarc::driver::CudaStream>,
    config: TimingConfig,
    launch: impl Fn() -> Result<(), AttentionError>,
) -> Result<Timing, AttentionError> {
    time_on_stream(stream, config, |_| {
        launch().map_err(|e| match e {
            AttentionError::Host(e) => e,
            other => fragmask_host::Error::InvalidArgument(other.to_string()),
        })
    })
    .map_err(AttentionError::Host)
}

/// CUDA-event timing of a prepared forward launch through [`time_on_stream`]: the
/// warm-up launches of `config`, then `config.runs` launches each between two events.
pub fn time_launches(
    launch: &PreparedLaunch<'_>,
    config: TimingConfig,
) -> Result<Timing, AttentionError> {
    time_calls(launch.stream(), config, || launch.launch())
}

/// CUDA-event timing of a prepared backward (the three kernels together): the warm-up
/// calls of `config`, then `config.runs` calls each between two events.
pub fn time_backward(
    launch: &PreparedBackward<'_>,
    config: TimingConfig,
) -> Result<Timing, AttentionError> {
    time_calls(launch.stream(), config, || launch.launch())
}

/// The SASS of a compiled forward kernel (`cuobjdump -sass` and `-res-usage`, with
/// ptxas' report from its log), through [`sass::inspect_bytes`].
pub fn kernel_sass(compiled: &CompiledKernel) -> Result<KernelSass, AttentionError> {
    let report = sass::inspect_bytes(&compiled.cubin).map_err(AttentionError::Host)?;
    let mut kernel = report
        .kernels
        .into_iter()
        .find(|k| k.name == KERNEL_NAME)
        .ok_or_else(|| {
            AttentionError::Host(fragmask_host::Error::Parse {
                what: "cuobjdump -sass output",
                detail: format!("no function {KERNEL_NAME} in the attention cubin"),
            })
        })?;
    kernel.ptxas = sass::parse_ptxas_log(&compiled.log).remove(KERNEL_NAME);
    Ok(kernel)
}

/// The SASS text of a compiled forward kernel's cubin ([`sass::disassemble`]).
pub fn kernel_sass_text(compiled: &CompiledKernel) -> Result<String, AttentionError> {
    sass::disassemble(&compiled.cubin).map_err(AttentionError::Host)
}
