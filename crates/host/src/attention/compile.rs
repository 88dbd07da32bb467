//! Compiling the generated attention kernels to sm_90a cubins and reading
//! ptxas' resource report and the SASS (no GPU needed).

use std::process::Command;

use fragmask_kernels::attention::AttentionKernel;

use super::AttentionError;
use crate::nvrtc::{Arch, CompileOptions, Compiler};

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
    let (registers, spill_bytes, stack_bytes) = parse_ptxas_report(&cubin.log);
    Ok(CompiledKernel {
        config: *config,
        source,
        cubin: cubin.bytes,
        log: cubin.log,
        registers,
        spill_bytes,
        stack_bytes,
    })
}

/// `(registers, spill store + load bytes, stack frame bytes)` from a ptxas `-v` log.
pub fn parse_ptxas_report(log: &str) -> (u32, u32, u32) {
    let number_before = |line: &str, key: &str| -> Option<u32> {
        let at = line.find(key)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    let (mut registers, mut spill, mut stack) = (0, 0, 0);
    for line in log.lines() {
        if let Some(r) = number_before(line, "registers") {
            registers = registers.max(r);
        }
        spill += number_before(line, "bytes spill stores").unwrap_or(0);
        spill += number_before(line, "bytes spill loads").unwrap_or(0);
        stack = stack.max(number_before(line, "bytes stack frame").unwrap_or(0));
    }
    (registers, spill, stack)
}

/// Instruction counts of interest in a cubin's SASS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SassSummary {
    /// wgmma instructions (`HGMMA`).
    pub hgmma: usize,
    /// Local-memory loads and stores (`LDL`, `STL`).
    pub local_memory_ops: usize,
    /// Bulk tensor copies (`UTMALDG`).
    pub tma_loads: usize,
    /// Total SASS instruction lines.
    pub instructions: usize,
}

/// Disassembles `cubin` with `cuobjdump --dump-sass` and counts instructions.
pub fn sass_summary(cubin: &[u8]) -> Result<SassSummary, AttentionError> {
    let sass = dump_sass(cubin)?;
    let mut s = SassSummary::default();
    for line in sass.lines() {
        // Instruction lines look like `        /*0120*/                   HGMMA.64x128x16.F32.BF16 ... ;`
        let Some((_, code)) = line
            .trim_start()
            .strip_prefix("/*")
            .and_then(|l| l.split_once("*/"))
        else {
            continue;
        };
        let code = code.trim();
        if code.is_empty() || !code.ends_with(';') && !code.contains(';') {
            continue;
        }
        s.instructions += 1;
        let has = |op: &str| {
            code.split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == op)
        };
        if code.contains("HGMMA") {
            s.hgmma += 1;
        }
        if has("LDL") || has("STL") || code.contains("LDL.") || code.contains("STL.") {
            s.local_memory_ops += 1;
        }
        if code.contains("UTMALDG") {
            s.tma_loads += 1;
        }
    }
    Ok(s)
}

/// The SASS text of `cubin` (`cuobjdump --dump-sass`).
pub fn dump_sass(cubin: &[u8]) -> Result<String, AttentionError> {
    let tool = crate::toolchain::find_tool("cuobjdump").map_err(AttentionError::Host)?;
    let path = std::env::temp_dir().join(format!(
        "fragmask-attention-{}-{}.cubin",
        std::process::id(),
        cubin.len()
    ));
    // Removed whether the write (e.g. on a full disk) or the tool fails; errors name
    // the temporary directory, not the internal file name.
    let out = match std::fs::write(&path, cubin) {
        Ok(()) => Command::new(&tool).arg("--dump-sass").arg(&path).output(),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(AttentionError::Io {
                path: std::env::temp_dir(),
                source: e,
            });
        }
    };
    let _ = std::fs::remove_file(&path);
    let out = out.map_err(|e| AttentionError::Io {
        path: tool.clone(),
        source: e,
    })?;
    if !out.status.success() {
        return Err(AttentionError::Tool(format!(
            "cuobjdump failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
