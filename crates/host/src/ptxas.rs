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

/// ptxas' codes for serialising a function's wgmmas (a wait after every issue): C7510,
/// C7512, C7513 (a non-wgmma instruction defining a wgmma's input registers inside its
/// pipeline stage), C7518 (an accumulator possibly in flight where paths join).
const WGMMA_SERIALISED_CODES: [&str; 4] = ["C7510", "C7512", "C7513", "C7518"];

/// The lines of an NVRTC log in which ptxas says it serialised wgmmas, by message or by
/// code (empty when it did not). A change to a main loop can cause this with no other sign
/// than the SASS.
pub fn wgmma_serialisation_notes(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| {
            line.contains("wgmma.mma_async instructions are serialized")
                || WGMMA_SERIALISED_CODES
                    .iter()
                    .any(|code| line.contains(code))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_notes_are_found_by_message_and_by_code() {
        let log = "ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async \
                   instructions are serialized due to non wgmma instructions defining input \
                   registers of a wgmma between start and end of the pipeline stage in the \
                   function 'fragmask_attention_fwd'\n\
                   ptxas info    : Used 168 registers, used 16 barriers\n\
                   ptxas info    : (C7518) something else\n";
        let notes = wgmma_serialisation_notes(log);
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("C7513") && notes[1].contains("C7518"));
        assert!(wgmma_serialisation_notes("ptxas info    : Used 168 registers\n").is_empty());
    }
}
