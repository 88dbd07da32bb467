//! Finding the CUDA compile toolchain: `libnvrtc` and the binary tools.
//!
//! NVRTC is loaded by cudarc's dynamic loading, which searches the dynamic
//! linker's path (`LD_LIBRARY_PATH`, then the system) for `libnvrtc.so*`.
//! cudarc *panics* when the library is missing, so every entry point of this
//! crate that touches NVRTC first calls [`nvrtc_available`], which probes the
//! library with a plain `dlopen` (cudarc's `is_culib_present`) and resolves
//! `nvrtcVersion` under `catch_unwind`, turning "not installed" into
//! [`Error::NvrtcNotFound`].
//!
//! The binary tools (`cuobjdump`, `nvdisasm`, `ptxas`) are looked up by
//! [`find_tool`] in this order:
//! 1. `$FRAGMASK_CUDA_HOME` (the install folder of
//!    `scripts/install-cuda-toolchain.sh`; its `nvidia/*/bin` and `bin`),
//! 2. `PATH`,
//! 3. `$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `/usr/local/cuda/bin`,
//! 4. the repository's default install folder `.cache/cuda-toolchain`
//!    (located from this crate's source path at build time; only useful in a
//!    checkout).

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::sys;

use crate::error::{Error, Result};

/// NVRTC's version, `(major, minor)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NvrtcVersion {
    /// Major version (13 for CUDA 13.x).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl std::fmt::Display for NvrtcVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Checks that `libnvrtc` can be loaded and called.
///
/// Returns [`Error::NvrtcNotFound`] (never panics) when it cannot. The
/// result is computed once per process.
pub fn nvrtc_available() -> Result<()> {
    nvrtc_version().map(|_| ())
}

/// The version of the NVRTC library that cudarc loads.
pub fn nvrtc_version() -> Result<NvrtcVersion> {
    static PROBE: OnceLock<std::result::Result<NvrtcVersion, String>> = OnceLock::new();
    PROBE
        .get_or_init(probe_nvrtc)
        .clone()
        .map_err(|detail| Error::NvrtcNotFound { detail })
}

fn probe_nvrtc() -> std::result::Result<NvrtcVersion, String> {
    // SAFETY: `is_culib_present` only tries `dlopen` on candidate library
    // names and closes what it opened; it runs no library code besides the
    // library's initialisers, which is what loading it at all would do.
    let present = unsafe { sys::is_culib_present() };
    if !present {
        return Err("libnvrtc (e.g. libnvrtc.so.13) is not on the library search path".into());
    }
    let call = catch_unwind(AssertUnwindSafe(|| {
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: both pointers are valid, writable `c_int`s for the call.
        let rc = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
        (rc, major, minor)
    }));
    match call {
        Ok((sys::nvrtcResult::NVRTC_SUCCESS, major, minor)) => Ok(NvrtcVersion {
            major: major.max(0) as u32,
            minor: minor.max(0) as u32,
        }),
        Ok((rc, _, _)) => Err(format!("nvrtcVersion failed: {rc:?}")),
        Err(_) => Err("libnvrtc was found but could not be loaded by cudarc".into()),
    }
}

/// Folders [`find_tool`] searches besides `PATH`, in order.
pub fn tool_search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("FRAGMASK_CUDA_HOME") {
        push_toolchain_dirs(&mut dirs, Path::new(&home));
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            dirs.push(Path::new(&root).join("bin"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    let repo_default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/cuda-toolchain");
    push_toolchain_dirs(&mut dirs, &repo_default);
    dirs
}

/// The `bin` folders of a pip `--target` install (`nvidia/<cu13>/bin`) and a plain `bin`.
fn push_toolchain_dirs(dirs: &mut Vec<PathBuf>, root: &Path) {
    if let Ok(entries) = std::fs::read_dir(root.join("nvidia")) {
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .filter(|p| p.is_dir())
            .collect();
        found.sort();
        dirs.extend(found);
    }
    dirs.push(root.join("bin"));
}

/// Finds an executable tool by name (see the module docs for the order).
pub fn find_tool(tool: &'static str) -> Result<PathBuf> {
    let dirs = tool_search_dirs();
    for dir in &dirs {
        let candidate = dir.join(tool);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(Error::ToolNotFound {
        tool,
        searched: dirs,
    })
}

fn is_executable(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                meta.permissions().mode() & 0o111 != 0
            }
            #[cfg(not(unix))]
            {
                true
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_is_a_typed_error() {
        let err = find_tool("fragmask-no-such-tool").unwrap_err();
        assert!(matches!(err, Error::ToolNotFound { .. }));
        assert!(err.to_string().contains("fragmask-no-such-tool not found"));
    }

    #[test]
    fn nvrtc_probe_never_panics() {
        // Whatever the machine has, this returns instead of panicking.
        let _ = nvrtc_available();
    }
}
