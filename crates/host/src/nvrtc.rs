//! Compiling CUDA C++ with NVRTC: to a cubin (SASS for one architecture) or to PTX.
//!
//! Results are cached on disk (see [`crate::cache`]) under a key made of the
//! source, the options, the output kind and the NVRTC version; an entry is checked
//! (key, kind, SHA-256) before it is used, and a defective one is compiled again and
//! replaced (`CacheStatus::Repaired`). NVRTC is
//! driven through `cudarc::nvrtc::result` / `sys` because the safe cudarc API
//! only returns PTX; a cubin comes from `nvrtcGetCUBIN` after compiling with
//! `--gpu-architecture=sm_XY[a]` (docs/architecture.md, fact 8).
//!
//! Compilation needs no GPU: [`Arch`] is explicit, or derived from a
//! [`crate::Device`]'s compute capability when there is one.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use cudarc::nvrtc::result as nvrtc_result;
use cudarc::nvrtc::sys;

use crate::cache;
use crate::error::{Error, Result};
use crate::toolchain;

/// A real GPU architecture name such as `sm_90a` (validated).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Arch(String);

impl Arch {
    /// Hopper with its arch-specific features (wgmma, setmaxnreg): `sm_90a`.
    pub fn sm90a() -> Self {
        Arch("sm_90a".into())
    }

    /// Parses `sm_<digits>` with an optional `a` or `f` suffix (`sm_80`, `sm_90a`, `sm_100f`).
    pub fn parse(name: &str) -> Result<Self> {
        let invalid = || {
            Error::InvalidArgument(format!(
                "invalid GPU architecture {name:?}: expected sm_<digits> with optional a/f suffix, e.g. sm_90a"
            ))
        };
        let rest = name.strip_prefix("sm_").ok_or_else(invalid)?;
        let digits = rest.strip_suffix(['a', 'f']).unwrap_or(rest);
        if digits.len() < 2 || digits.len() > 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        Ok(Arch(name.to_string()))
    }

    /// The arch for a compute capability: `sm_{major}{minor}a` from Hopper
    /// (9.0) on, so that arch-specific instructions are available; plain
    /// `sm_{major}{minor}` before.
    pub fn from_compute_capability(major: u32, minor: u32) -> Self {
        if major >= 9 {
            Arch(format!("sm_{major}{minor}a"))
        } else {
            Arch(format!("sm_{major}{minor}"))
        }
    }

    /// The name, e.g. `sm_90a`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The matching virtual architecture, e.g. `compute_90a` (what PTX is generated for).
    pub fn virtual_name(&self) -> String {
        self.0.replacen("sm_", "compute_", 1)
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Options of one compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// Target architecture.
    pub arch: Arch,
    /// Ask ptxas for its resource report (`--ptxas-options=-v`); it lands in
    /// the compile log. Only meaningful for cubins.
    pub ptxas_verbose: bool,
    /// Further NVRTC options, passed through verbatim (e.g. `-lineinfo`, `-DFOO=1`).
    pub extra: Vec<String>,
}

impl CompileOptions {
    /// Default options for `arch`: `-std=c++17`, ptxas resource report on.
    pub fn new(arch: Arch) -> Self {
        Self {
            arch,
            ptxas_verbose: true,
            extra: Vec::new(),
        }
    }

    /// The NVRTC argument list for a cubin (`real = true`) or PTX.
    pub fn to_args(&self, real: bool) -> Vec<String> {
        let mut args = Vec::with_capacity(3 + self.extra.len());
        if real {
            args.push(format!("--gpu-architecture={}", self.arch.as_str()));
            if self.ptxas_verbose {
                args.push("--ptxas-options=-v".to_string());
            }
        } else {
            args.push(format!("--gpu-architecture={}", self.arch.virtual_name()));
        }
        args.push("-std=c++17".to_string());
        args.extend(self.extra.iter().cloned());
        args
    }
}

pub use crate::cache::CacheStatus;

/// A compiled cubin (an ELF with SASS for one architecture).
#[derive(Debug, Clone)]
pub struct Cubin {
    /// The ELF image.
    pub bytes: Vec<u8>,
    /// NVRTC's log (warnings and, with `ptxas_verbose`, ptxas' resource report).
    pub log: String,
    /// The architecture it was compiled for.
    pub arch: Arch,
    /// Cache outcome.
    pub cache: CacheStatus,
}

/// Compiled PTX text.
#[derive(Debug, Clone)]
pub struct Ptx {
    /// The PTX assembly.
    pub text: String,
    /// NVRTC's log.
    pub log: String,
    /// Cache outcome.
    pub cache: CacheStatus,
}

/// An NVRTC compiler with an optional on-disk cache.
#[derive(Debug, Clone)]
pub struct Compiler {
    cache_dir: Option<PathBuf>,
}

impl Default for Compiler {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone, Copy)]
enum Output {
    Cubin,
    Ptx,
}

impl Output {
    fn kind(self) -> &'static str {
        match self {
            Output::Cubin => "cubin",
            Output::Ptx => "ptx",
        }
    }
}

impl Compiler {
    /// A compiler caching under [`cache::default_cache_dir`] (no cache if none can be derived).
    pub fn new() -> Self {
        Self {
            cache_dir: cache::default_cache_dir(),
        }
    }

    /// A compiler caching under `dir`.
    pub fn with_cache_dir(dir: impl Into<PathBuf>) -> Self {
        Self {
            cache_dir: Some(dir.into()),
        }
    }

    /// A compiler without a cache.
    pub fn uncached() -> Self {
        Self { cache_dir: None }
    }

    /// The cache directory, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// Compiles `source` to a cubin for `options.arch`.
    pub fn compile_cubin(&self, source: &str, options: &CompileOptions) -> Result<Cubin> {
        let (bytes, log, cache) = self.compile(source, options, Output::Cubin)?;
        Ok(Cubin {
            bytes,
            log,
            arch: options.arch.clone(),
            cache,
        })
    }

    /// Compiles `source` to PTX for the virtual architecture of `options.arch`.
    pub fn compile_ptx(&self, source: &str, options: &CompileOptions) -> Result<Ptx> {
        let (bytes, log, cache) = self.compile(source, options, Output::Ptx)?;
        let text = String::from_utf8(bytes).map_err(|e| Error::Parse {
            what: "NVRTC PTX output",
            detail: e.to_string(),
        })?;
        Ok(Ptx { text, log, cache })
    }

    fn compile(
        &self,
        source: &str,
        options: &CompileOptions,
        output: Output,
    ) -> Result<(Vec<u8>, String, CacheStatus)> {
        let version = toolchain::nvrtc_version()?;
        let args = options.to_args(matches!(output, Output::Cubin));
        let key = cache::cache_key(output.kind(), (version.major, version.minor), &args, source);
        let (entry, status) =
            cache::get_or_compile(self.cache_dir.as_deref(), &key, output.kind(), || {
                compile_uncached(source, &args, output)
                    .map(|(payload, log)| cache::Entry { payload, log })
            })?;
        Ok((entry.payload, entry.log, status))
    }
}

/// Owns an `nvrtcProgram` and destroys it on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `create_program` and is destroyed only here.
        let _ = unsafe { nvrtc_result::destroy_program(self.0) };
    }
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn compile_uncached(source: &str, args: &[String], output: Output) -> Result<(Vec<u8>, String)> {
    let c_source = CString::new(source)
        .map_err(|_| Error::InvalidArgument("CUDA source contains a NUL byte".to_string()))?;
    if let Some(bad) = args.iter().find(|a| a.contains('\0')) {
        // cudarc would panic on this inside compile_program.
        return Err(Error::InvalidArgument(format!(
            "NVRTC option {bad:?} contains a NUL byte"
        )));
    }
    // cudarc resolves NVRTC symbols lazily and panics if one is missing;
    // `nvrtc_version` already proved the library loads, this is a second guard.
    catch_unwind(AssertUnwindSafe(|| {
        compile_program(&c_source, args, output)
    }))
    .unwrap_or_else(|_| {
        Err(Error::NvrtcNotFound {
            detail: "an NVRTC entry point could not be resolved".into(),
        })
    })
}

fn compile_program(
    c_source: &CString,
    args: &[String],
    output: Output,
) -> Result<(Vec<u8>, String)> {
    let prog = Program(
        nvrtc_result::create_program(c_source, Some(c"fragmask.cu"))
            .map_err(Error::nvrtc("creating the program"))?,
    );
    // SAFETY: `prog.0` is a live program created above; options are NUL-free.
    let compiled = unsafe { nvrtc_result::compile_program(prog.0, args) };
    // SAFETY: `prog.0` is live.
    let log = unsafe { nvrtc_result::get_program_log(prog.0) }
        .map(|chars| c_chars_to_string(&chars))
        .unwrap_or_default();
    match compiled {
        Ok(()) => {}
        Err(e) if e.0 == sys::nvrtcResult::NVRTC_ERROR_COMPILATION => {
            return Err(Error::Compile {
                options: args.to_vec(),
                log,
            })
        }
        Err(e) if e.0 == sys::nvrtcResult::NVRTC_ERROR_INVALID_OPTION => {
            return Err(Error::Compile {
                options: args.to_vec(),
                log: format!("NVRTC rejected an option ({e}).\n{log}"),
            })
        }
        Err(e) => return Err(Error::nvrtc("compiling")(e)),
    }
    let bytes = match output {
        Output::Ptx => {
            // SAFETY: `prog.0` is live and compiled.
            let chars = unsafe { nvrtc_result::get_ptx(prog.0) }
                .map_err(Error::nvrtc("reading the PTX"))?;
            c_chars_to_string(&chars).into_bytes()
        }
        Output::Cubin => {
            let mut size: usize = 0;
            // SAFETY: `prog.0` is live and compiled; `size` is a valid out-pointer.
            unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
                .result()
                .map_err(Error::nvrtc("reading the cubin size"))?;
            if size == 0 {
                return Err(Error::Compile {
                    options: args.to_vec(),
                    log: format!(
                        "NVRTC produced no cubin (was a virtual compute_* architecture given?)\n{log}"
                    ),
                });
            }
            let mut bytes = vec![0u8; size];
            // SAFETY: `bytes` has exactly the `size` bytes NVRTC asked for.
            unsafe { sys::nvrtcGetCUBIN(prog.0, bytes.as_mut_ptr().cast::<c_char>()) }
                .result()
                .map_err(Error::nvrtc("reading the cubin"))?;
            bytes
        }
    };
    Ok((bytes, log))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_parsing() {
        assert_eq!(Arch::parse("sm_90a").unwrap(), Arch::sm90a());
        assert!(Arch::parse("sm_80").is_ok());
        assert!(Arch::parse("sm_100f").is_ok());
        for bad in [
            "",
            "sm_",
            "sm_9",
            "compute_90a",
            "sm_90b",
            "sm_9000",
            "sm_9a",
        ] {
            assert!(Arch::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Arch::sm90a().virtual_name(), "compute_90a");
        assert_eq!(Arch::from_compute_capability(9, 0), Arch::sm90a());
        assert_eq!(Arch::from_compute_capability(8, 6).as_str(), "sm_86");
    }

    #[test]
    fn option_lists() {
        let o = CompileOptions::new(Arch::sm90a());
        assert_eq!(
            o.to_args(true),
            [
                "--gpu-architecture=sm_90a",
                "--ptxas-options=-v",
                "-std=c++17"
            ]
        );
        assert_eq!(
            o.to_args(false),
            ["--gpu-architecture=compute_90a", "-std=c++17"]
        );
    }
}
