//! ptxas' `-v` resource report, as NVRTC leaves it in the compile log: registers,
//! stack frame and spill bytes per function. The runtime records it for every kernel
//! it compiles ([`crate::attention::CompiledKernel`]); the SASS inspection of the
//! checking crate merges it into its per-kernel report.

use std::collections::BTreeMap;

/// What ptxas' `-v` report says about one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Stack frame bytes.
    pub stack_frame_bytes: Option<u32>,
    /// Spill-store bytes.
    pub spill_store_bytes: Option<u32>,
    /// Spill-load bytes.
    pub spill_load_bytes: Option<u32>,
}

/// Parses ptxas' `-v` report (as found in an NVRTC log) per function.
pub fn parse_ptxas_log(log: &str) -> BTreeMap<String, PtxasReport> {
    let mut out: BTreeMap<String, PtxasReport> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(pos) = line.find("Function properties for ") {
            let name = line[pos + "Function properties for ".len()..]
                .trim()
                .to_string();
            out.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        if let Some(pos) = line.find("Compiling entry function '") {
            let rest = &line[pos + "Compiling entry function '".len()..];
            if let Some(end) = rest.find('\'') {
                let name = rest[..end].to_string();
                out.entry(name.clone()).or_default();
                current = Some(name);
            }
            continue;
        }
        let Some(name) = &current else { continue };
        let Some(entry) = out.get_mut(name) else {
            continue;
        };
        if let Some(v) = number_before(line, "bytes stack frame") {
            entry.stack_frame_bytes = Some(v);
        }
        if let Some(v) = number_before(line, "bytes spill stores") {
            entry.spill_store_bytes = Some(v);
        }
        if let Some(v) = number_before(line, "bytes spill loads") {
            entry.spill_load_bytes = Some(v);
        }
        if let Some(pos) = line.find("Used ") {
            if let Some(v) = number_before(&line[pos..], "registers") {
                entry.registers = Some(v);
            }
        }
    }
    out
}

/// The integer immediately before `marker` in `line` (`"0 bytes spill stores"` → 0).
fn number_before(line: &str, marker: &str) -> Option<u32> {
    let pos = line.find(marker)?;
    line[..pos].split_whitespace().last()?.parse().ok()
}
