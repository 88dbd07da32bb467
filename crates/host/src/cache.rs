//! The on-disk compilation cache: where it lives and how entries are keyed.
//!
//! - Location: `$FRAGMASK_CACHE_DIR` if set, else `$XDG_CACHE_HOME/fragmask/nvrtc`,
//!   else `$HOME/.cache/fragmask/nvrtc`. With none of these set there is no
//!   default cache (compilation still works, uncached).
//! - Key: a 128-bit FNV-1a hash over a format tag, the NVRTC version, the
//!   output kind, every option and the source, each length-prefixed so that
//!   different splits of the same bytes cannot collide. FNV is a few lines, stable
//!   across Rust versions and platforms (unlike `std::hash`), and needs no new
//!   dependency; 128 bits make accidental collisions negligible for a cache.
//! - Writes go to a unique temporary file that is then renamed into place, so
//!   concurrent compilers (parallel tests, several processes) never see a torn entry.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Bumped whenever the cached content or key scheme changes.
const FORMAT_TAG: &[u8] = b"fragmask-nvrtc-cache-v1";

/// The cache directory chosen from the environment (see the module docs),
/// or `None` if no location can be derived.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = non_empty_env("FRAGMASK_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = non_empty_env("XDG_CACHE_HOME") {
        return Some(Path::new(&xdg).join("fragmask").join("nvrtc"));
    }
    non_empty_env("HOME").map(|home| {
        Path::new(&home)
            .join(".cache")
            .join("fragmask")
            .join("nvrtc")
    })
}

fn non_empty_env(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// 128-bit FNV-1a.
#[derive(Debug, Clone, Copy)]
pub struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;

    /// A fresh hasher.
    pub fn new() -> Self {
        Self(Self::OFFSET)
    }

    /// Feeds raw bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u128::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// Feeds a length-prefixed field.
    pub fn field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    /// The hash value.
    pub fn finish(&self) -> u128 {
        self.0
    }
}

impl Default for Fnv128 {
    fn default() -> Self {
        Self::new()
    }
}

/// The cache key of one compilation, as 32 hex digits.
pub fn cache_key(
    kind: &str,
    nvrtc_version: (u32, u32),
    options: &[String],
    source: &str,
) -> String {
    let mut h = Fnv128::new();
    h.field(FORMAT_TAG);
    h.field(format!("{}.{}", nvrtc_version.0, nvrtc_version.1).as_bytes());
    h.field(kind.as_bytes());
    h.write(&(options.len() as u64).to_le_bytes());
    for opt in options {
        h.field(opt.as_bytes());
    }
    h.field(source.as_bytes());
    format!("{:032x}", h.finish())
}

/// Reads a cache entry; `None` when absent or unreadable (a cache miss).
pub fn read_entry(dir: &Path, file_name: &str) -> Option<Vec<u8>> {
    std::fs::read(dir.join(file_name)).ok()
}

/// Writes a cache entry atomically (temporary file + rename).
pub fn write_entry(dir: &Path, file_name: &str, bytes: &[u8]) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let tmp = dir.join(format!(
        ".{file_name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(file_name))
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(dir.join(file_name), e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv128_known_vectors() {
        // Reference values of 128-bit FNV-1a.
        assert_eq!(Fnv128::new().finish(), 0x6c62272e07bb014262b821756295c58d);
        let mut h = Fnv128::new();
        h.write(b"a");
        assert_eq!(h.finish(), 0xd228cb696f1a8caf78912b704e4a8964);
    }

    #[test]
    fn keys_depend_on_every_input() {
        let opts = vec!["--gpu-architecture=sm_90a".to_string()];
        let base = cache_key("cubin", (13, 0), &opts, "src");
        assert_eq!(base.len(), 32);
        assert_eq!(base, cache_key("cubin", (13, 0), &opts, "src"));
        assert_ne!(base, cache_key("ptx", (13, 0), &opts, "src"));
        assert_ne!(base, cache_key("cubin", (13, 1), &opts, "src"));
        assert_ne!(base, cache_key("cubin", (13, 0), &[], "src"));
        assert_ne!(base, cache_key("cubin", (13, 0), &opts, "src2"));
        // Length prefixes: moving bytes between fields changes the key.
        let split_a = cache_key("cubin", (13, 0), &["ab".into(), "c".into()], "");
        let split_b = cache_key("cubin", (13, 0), &["a".into(), "bc".into()], "");
        assert_ne!(split_a, split_b);
    }

    #[test]
    fn entries_round_trip() {
        let dir = std::env::temp_dir().join(format!("fragmask-cache-test-{}", std::process::id()));
        write_entry(&dir, "k.bin", b"hello").unwrap();
        assert_eq!(read_entry(&dir, "k.bin").as_deref(), Some(&b"hello"[..]));
        assert_eq!(read_entry(&dir, "missing.bin"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
