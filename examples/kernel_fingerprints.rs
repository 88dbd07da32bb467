//! Writes the generated CUDA source and the SASS of every kernel variant the test
//! sweeps compile (forward, backward, decode, lightning) into a folder, one
//! `<label>.cu` and `<label>.sass` each, so that a refactor of the generators can be checked to leave
//! the machine code unchanged: `diff -r before/ after/` (docs/codegen.md).
//! Needs NVRTC and cuobjdump (scripts/install-cuda-toolchain.sh), no GPU.
//!
//! `cargo run --release --example kernel_fingerprints -- OUT_DIR [FILTER]` (FILTER: only the
//! variants whose file name contains it, e.g. `bwd-bwd_128k_2wg_bf16_d128_blocks`).
//! A kernel whose wgmmas ptxas serialised is named on stderr with ptxas' note.

use std::path::Path;
use std::process::Command;

use fragmask::host::attention::backward::compile_backward;
use fragmask::host::attention::compile::compile_kernel;
use fragmask::host::nvrtc::{Arch, CompileOptions, Compiler};
use fragmask::host::toolchain::find_tool;
use fragmask::kernels::attention::backward::BackwardKernel;
use fragmask::kernels::attention::{ActDtype, AttentionKernel};

/// The longest label kept whole in a file name (names stay under 255 bytes with the
/// extension); a longer one keeps its first `MAX_LABEL - 17` bytes and a hash of the rest.
const MAX_LABEL: usize = 200;

/// A file-name-safe label, the same for the same kernel in every build.
fn file_label(label: &str) -> String {
    let label = label.replace(['/', ' ', '{', '}', ',', ':'], "_");
    if label.len() <= MAX_LABEL {
        return label;
    }
    // FNV-1a 64 (stable across Rust versions, unlike std's DefaultHasher).
    let hash = label.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut cut = MAX_LABEL - 17;
    while !label.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash:016x}", &label[..cut])
}

/// Prints ptxas' notes that it serialised a kernel's wgmmas
/// (`ptxas::wgmma_serialisation_notes`; the example's output, not a library's).
fn report_serialized(label: &str, log: &str) {
    for line in fragmask::host::ptxas::wgmma_serialisation_notes(log) {
        eprintln!("{label}: {line}");
    }
}

fn sass_of(source: &str, cubin: &[u8], dir: &Path, label: &str) -> Result<(), String> {
    let label = file_label(label);
    std::fs::write(dir.join(format!("{label}.cu")), source).map_err(|e| e.to_string())?;
    let cubin_path = dir.join(format!("{label}.cubin"));
    std::fs::write(&cubin_path, cubin).map_err(|e| e.to_string())?;
    let tool = find_tool("cuobjdump").map_err(|e| e.to_string())?;
    let out = Command::new(tool)
        .arg("-sass")
        .arg(&cubin_path)
        .output()
        .map_err(|e| e.to_string())?;
    std::fs::remove_file(&cubin_path).map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    // The file name cuobjdump prints is the only line that varies between runs.
    let text: String = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains(".cubin"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join(format!("{label}.sass")), text).map_err(|e| e.to_string())
}

fn main() -> Result<(), String> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: kernel_fingerprints OUT_DIR [FILTER]")?;
    let filter = std::env::args().nth(2).unwrap_or_default();
    // Matched against the file name a label gets, the one the folder shows.
    let wanted = |label: &str| file_label(label).contains(filter.as_str());
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut n = 0;
    for k in AttentionKernel::compile_sweep().map_err(|e| e.to_string())? {
        // The Debug text without its type names (a file name stays under 255 bytes).
        let label = format!("fwd-{k:?}")
            .replace("AttentionKernel { geometry: Geometry { ", "")
            .replace([' ', '{', '}', ',', ':'], "_");
        if !wanted(&label) {
            continue;
        }
        let c = compile_kernel(&k).map_err(|e| format!("{label}: {e}"))?;
        report_serialized(&label, &c.log);
        sass_of(&c.source, &c.cubin, dir, &label)?;
        n += 1;
    }
    for k in BackwardKernel::compile_sweep().map_err(|e| e.to_string())? {
        if !wanted(&format!("bwd-{}", k.label())) {
            continue;
        }
        let c = compile_backward(&k).map_err(|e| format!("{}: {e}", k.label()))?;
        report_serialized(&k.label(), &c.log);
        sass_of(&c.source, &c.cubin, dir, &format!("bwd-{}", k.label()))?;
        n += 1;
    }
    let compiler = Compiler::uncached();
    let mut seen = std::collections::BTreeSet::new();
    for (i, case) in fragmask::check::decode::check::sweep_cases()
        .iter()
        .enumerate()
    {
        use fragmask::host::decode::DecodePlan;
        let plan = match case.packed_mask(i as u64).map_err(|e| e.to_string())? {
            Some(mask) => DecodePlan::for_mask(case.shape, &mask, 132, case.splits),
            None => DecodePlan::new(case.shape, case.shape.cache.capacity(), 132, case.splits),
        }
        .map_err(|e| format!("{}: {e}", case.label))?;
        let label = format!("dec-{:?}", plan.config).replace([' ', '{', '}', ',', ':'], "_");
        if !wanted(&label) || !seen.insert(label.clone()) {
            continue;
        }
        let src =
            fragmask::kernels::decode::source::source(plan.config).map_err(|e| e.to_string())?;
        let cubin = compiler
            .compile_cubin(&src, &CompileOptions::new(Arch::sm90a()))
            .map_err(|e| format!("{label}: {e}"))?;
        sass_of(&src, &cubin.bytes, dir, &label)?;
        n += 1;
    }
    for (dk, dv) in [(96, 96), (64, 64), (128, 128), (256, 256)] {
        for dtype in [ActDtype::Bf16, ActDtype::F16] {
            for c in fragmask::kernels::lightning::LightningConfig::candidates(dk, dv, dtype) {
                let label = format!("lin-{c:?}").replace([' ', '{', '}', ',', ':'], "_");
                if !wanted(&label) {
                    continue;
                }
                let src =
                    fragmask::kernels::lightning::source::source(c).map_err(|e| e.to_string())?;
                let cubin = compiler
                    .compile_cubin(&src, &CompileOptions::new(Arch::sm90a()))
                    .map_err(|e| format!("{label}: {e}"))?;
                sass_of(&src, &cubin.bytes, dir, &label)?;
                n += 1;
            }
        }
    }
    println!("{n} kernels written to {}", dir.display());
    Ok(())
}
