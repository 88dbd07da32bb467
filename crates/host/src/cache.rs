//! The on-disk compilation cache: where it lives, how entries are keyed, and how an
//! entry is checked before it is used (docs/reliability.md).
//!
//! - Location: `$FRAGMASK_CACHE_DIR` if set, else `$XDG_CACHE_HOME/fragmask/nvrtc`,
//!   else `$HOME/.cache/fragmask/nvrtc`. With none of these set there is no
//!   default cache (compilation still works, uncached).
//! - Key: SHA-256 over a format tag, the NVRTC version, the output kind, every option
//!   and the source, each length-prefixed so that different splits of the same bytes
//!   cannot collide; 64 hex digits. The source holds the kernel's whole variant
//!   (geometry, mask, dtype), so equal keys mean the same kernel.
//! - Entry: one file `<key>.<kind>` (`cubin` or `ptx`) holding a header, the compiled
//!   bytes and NVRTC's log (whose ptxas report gives `--inspect` its register counts).
//!   The header records the magic, the format version, the full key, the kind, both
//!   lengths and a SHA-256 of all of it ([`encode_entry`]).
//! - Reading ([`read_entry`]) opens without following links or blocking, accepts only
//!   a regular file of at most [`MAX_ENTRY_BYTES`], and checks every header field
//!   against the key asked for and the digest against the content. An entry that fails
//!   (truncated, zeroed, bit-flipped, another key's entry, a FIFO, a link, a huge
//!   sparse file) is a [`Defect`]: [`get_or_compile`] compiles again, replaces the
//!   entry atomically and reports the repair as a [`CacheRepair`], in the returned
//!   [`CacheStatus`] and in a journal that [`take_repairs`] drains (the library does
//!   not print; the CLI prints repairs to standard error).
//! - Writes go through `fragmask_masks::io::write_file_atomically`: a locked temporary
//!   with a random name, renamed into place, removed on SIGINT/SIGTERM by the CLI's
//!   handler, and removed by the next writer once no process holds its lock.

use std::fmt;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest as _, Sha256};

/// Bumped whenever the cached content or key scheme changes.
const FORMAT_TAG: &[u8] = b"fragmask-nvrtc-cache-v2";

/// First bytes of every entry.
pub const ENTRY_MAGIC: [u8; 8] = *b"FMNVRTC\0";

/// The entry format version written and read.
pub const ENTRY_VERSION: u32 = 2;

/// The largest entry read (cubins are a few MiB at most); a larger file is a defect,
/// refused by its length before anything is read.
pub const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// Bytes of the fixed header: magic, version, key length, kind length, payload
/// length, log length, SHA-256.
const FIXED_HEADER: usize = 8 + 4 + 4 + 4 + 8 + 8 + 32;

/// Offset of the digest in the header.
const DIGEST_AT: usize = FIXED_HEADER - 32;

/// Longest key and kind recorded (a key is 64 hex digits, a kind a few letters).
const MAX_NAME: usize = 256;

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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

/// The cache key of one compilation, as 64 hex digits (SHA-256).
pub fn cache_key(
    kind: &str,
    nvrtc_version: (u32, u32),
    options: &[String],
    source: &str,
) -> String {
    let mut h = Sha256::new();
    field(&mut h, FORMAT_TAG);
    field(
        &mut h,
        format!("{}.{}", nvrtc_version.0, nvrtc_version.1).as_bytes(),
    );
    field(&mut h, kind.as_bytes());
    h.update((options.len() as u64).to_le_bytes());
    for opt in options {
        field(&mut h, opt.as_bytes());
    }
    field(&mut h, source.as_bytes());
    hex(&h.finalize())
}

/// The file name of the entry for `key` and `kind`.
pub fn entry_file_name(key: &str, kind: &str) -> String {
    format!("{key}.{kind}")
}

/// A checked entry: the compiled bytes and NVRTC's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The cubin or PTX bytes.
    pub payload: Vec<u8>,
    /// NVRTC's log.
    pub log: String,
}

/// Why an entry on disk was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Defect {
    /// Not a regular file: a FIFO, a device, a directory, a symbolic link...
    NotRegularFile(&'static str),
    /// Larger than [`MAX_ENTRY_BYTES`] (by its length, before reading).
    TooLarge {
        /// Its length in bytes.
        len: u64,
    },
    /// It could not be opened or read.
    Unreadable(String),
    /// Shorter than its header says (or than a header).
    Truncated {
        /// Its length in bytes.
        len: u64,
    },
    /// Longer than its header says.
    TrailingBytes {
        /// Its length in bytes.
        len: u64,
    },
    /// It does not start with [`ENTRY_MAGIC`] (an entry of an older format, or garbage).
    BadMagic,
    /// Another entry format version.
    UnsupportedVersion(u32),
    /// A key or kind longer than any this cache writes.
    BadHeader,
    /// The SHA-256 does not match the content: a bit flipped, or bytes were overwritten.
    DigestMismatch,
    /// A valid entry of another compilation (another kernel variant).
    ForeignKey {
        /// The key it records.
        found: String,
    },
    /// A valid entry of the same key but another output kind.
    WrongKind {
        /// The kind it records.
        found: String,
    },
    /// The log is not UTF-8 (never written by this cache).
    LogNotUtf8,
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Defect::NotRegularFile(kind) => write!(f, "it is {kind}, not a regular file"),
            Defect::TooLarge { len } => write!(
                f,
                "it is {len} bytes; entries are at most {MAX_ENTRY_BYTES} bytes"
            ),
            Defect::Unreadable(e) => write!(f, "it could not be read: {e}"),
            Defect::Truncated { len } => {
                write!(
                    f,
                    "it is truncated ({len} bytes, shorter than its header says)"
                )
            }
            Defect::TrailingBytes { len } => {
                write!(f, "it is {len} bytes, longer than its header says")
            }
            Defect::BadMagic => write!(f, "it is not a fragmask cache entry (no magic)"),
            Defect::UnsupportedVersion(v) => {
                write!(f, "it has entry format version {v}, not {ENTRY_VERSION}")
            }
            Defect::BadHeader => write!(f, "its header is malformed"),
            Defect::DigestMismatch => {
                write!(f, "its SHA-256 does not match its content (corrupted)")
            }
            Defect::ForeignKey { found } => {
                write!(f, "it holds another kernel's entry (key {found})")
            }
            Defect::WrongKind { found } => write!(f, "it holds a {found} entry"),
            Defect::LogNotUtf8 => write!(f, "its compile log is not UTF-8"),
        }
    }
}

/// A defective entry that was compiled again and replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheRepair {
    /// The entry's path.
    pub path: PathBuf,
    /// What was wrong with it.
    pub defect: Defect,
    /// Why writing the replacement failed, if it did (the compiled result is still
    /// correct and used; the next run tries again).
    pub store_error: Option<String>,
}

impl fmt::Display for CacheRepair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "compile cache entry {}: {}; ",
            self.path.display(),
            self.defect
        )?;
        match &self.store_error {
            None => write!(f, "compiled again and replaced"),
            Some(e) => write!(f, "compiled again; replacing it failed: {e}"),
        }
    }
}

/// What happened with the on-disk cache for one compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheStatus {
    /// The result came from the cache (a checked entry).
    Hit,
    /// Compiled and stored.
    Stored,
    /// Compiled; storing failed (the result is still valid).
    StoreFailed(String),
    /// The entry was defective: compiled again and replaced (see the repair).
    Repaired(CacheRepair),
    /// No cache configured.
    Disabled,
}

/// The repairs not yet taken, oldest first (at most [`JOURNAL_LIMIT`]).
static JOURNAL: Mutex<Vec<CacheRepair>> = Mutex::new(Vec::new());

/// Repairs kept for [`take_repairs`]; later ones beyond this are dropped (each is
/// still in its own [`CacheStatus`]).
pub const JOURNAL_LIMIT: usize = 256;

fn journal(repair: &CacheRepair) {
    let mut j = JOURNAL.lock().unwrap_or_else(|e| e.into_inner());
    if j.len() < JOURNAL_LIMIT {
        j.push(repair.clone());
    }
}

/// Takes the repairs made by this process since the last call: for callers (the
/// CLI) that compile through layers which do not hand back each [`CacheStatus`].
pub fn take_repairs() -> Vec<CacheRepair> {
    std::mem::take(&mut *JOURNAL.lock().unwrap_or_else(|e| e.into_inner()))
}

fn digest(header_fields: &[u8], body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(header_fields);
    h.update(body);
    h.finalize().into()
}

/// The bytes of an entry: the fixed header (magic, version, key length, kind length,
/// payload length, log length as little-endian u32/u64, then a SHA-256 of everything
/// else in the file), then the key, the kind, the payload and the log.
pub fn encode_entry(key: &str, kind: &str, payload: &[u8], log: &str) -> Vec<u8> {
    let mut bytes =
        Vec::with_capacity(FIXED_HEADER + key.len() + kind.len() + payload.len() + log.len());
    bytes.extend_from_slice(&ENTRY_MAGIC);
    bytes.extend_from_slice(&ENTRY_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(key.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(kind.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&(log.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&[0; 32]);
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(kind.as_bytes());
    bytes.extend_from_slice(payload);
    bytes.extend_from_slice(log.as_bytes());
    let sum = digest(&bytes[..DIGEST_AT], &bytes[FIXED_HEADER..]);
    bytes[DIGEST_AT..FIXED_HEADER].copy_from_slice(&sum);
    bytes
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Checks the bytes of an entry against the `key` and `kind` asked for and returns
/// its content; every way it can be wrong is a [`Defect`] (fuzzed: `fuzz/`).
pub fn decode_entry(bytes: &[u8], key: &str, kind: &str) -> Result<Entry, Defect> {
    let len = bytes.len() as u64;
    if bytes.len() < FIXED_HEADER {
        return Err(if bytes.starts_with(&ENTRY_MAGIC) || bytes.is_empty() {
            Defect::Truncated { len }
        } else {
            Defect::BadMagic
        });
    }
    if bytes[..8] != ENTRY_MAGIC {
        return Err(Defect::BadMagic);
    }
    let version = u32_at(bytes, 8);
    if version != ENTRY_VERSION {
        return Err(Defect::UnsupportedVersion(version));
    }
    let key_len = u32_at(bytes, 12) as usize;
    let kind_len = u32_at(bytes, 16) as usize;
    if key_len > MAX_NAME || kind_len > MAX_NAME {
        return Err(Defect::BadHeader);
    }
    let payload_len = u64_at(bytes, 20);
    let log_len = u64_at(bytes, 28);
    let expected = (FIXED_HEADER as u64 + key_len as u64 + kind_len as u64)
        .checked_add(payload_len)
        .and_then(|n| n.checked_add(log_len));
    match expected {
        Some(n) if n == len => {}
        Some(n) if n < len => return Err(Defect::TrailingBytes { len }),
        _ => return Err(Defect::Truncated { len }),
    }
    if digest(&bytes[..DIGEST_AT], &bytes[FIXED_HEADER..]) != bytes[DIGEST_AT..FIXED_HEADER] {
        return Err(Defect::DigestMismatch);
    }
    // The lengths add up to the file's, so these ranges are in bounds.
    let key_end = FIXED_HEADER + key_len;
    let kind_end = key_end + kind_len;
    let payload_end = kind_end + payload_len as usize;
    let found_key = &bytes[FIXED_HEADER..key_end];
    if found_key != key.as_bytes() {
        return Err(Defect::ForeignKey {
            found: String::from_utf8_lossy(found_key).into_owned(),
        });
    }
    let found_kind = &bytes[key_end..kind_end];
    if found_kind != kind.as_bytes() {
        return Err(Defect::WrongKind {
            found: String::from_utf8_lossy(found_kind).into_owned(),
        });
    }
    let log = std::str::from_utf8(&bytes[payload_end..]).map_err(|_| Defect::LogNotUtf8)?;
    Ok(Entry {
        payload: bytes[kind_end..payload_end].to_vec(),
        log: log.to_string(),
    })
}

/// What [`read_entry`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A checked entry.
    Hit(Entry),
    /// No entry.
    Miss,
    /// An entry that must not be used.
    Defective(Defect),
}

fn file_kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Reads and checks the entry for `key` and `kind` in `dir`. Never blocks on a FIFO,
/// never follows a link, never reads more than [`MAX_ENTRY_BYTES`].
pub fn read_entry(dir: &Path, key: &str, kind: &str) -> Lookup {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(entry_file_name(key, kind));
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
        Err(e) => return Lookup::Defective(Defect::Unreadable(e.to_string())),
    };
    if !meta.file_type().is_file() {
        return Lookup::Defective(Defect::NotRegularFile(file_kind(&meta.file_type())));
    }
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
        Err(e) => return Lookup::Defective(Defect::Unreadable(e.to_string())),
    };
    // Checked again on the open file: the name may have been replaced meanwhile.
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return Lookup::Defective(Defect::Unreadable(e.to_string())),
    };
    if !meta.file_type().is_file() {
        return Lookup::Defective(Defect::NotRegularFile(file_kind(&meta.file_type())));
    }
    if meta.len() > MAX_ENTRY_BYTES {
        return Lookup::Defective(Defect::TooLarge { len: meta.len() });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // Never more than the limit + 1, even if the file grows while it is read.
    if let Err(e) = file.take(MAX_ENTRY_BYTES + 1).read_to_end(&mut bytes) {
        return Lookup::Defective(Defect::Unreadable(e.to_string()));
    }
    if bytes.len() as u64 > MAX_ENTRY_BYTES {
        return Lookup::Defective(Defect::TooLarge {
            len: bytes.len() as u64,
        });
    }
    match decode_entry(&bytes, key, kind) {
        Ok(entry) => Lookup::Hit(entry),
        Err(defect) => Lookup::Defective(defect),
    }
}

/// Writes the entry for `key` and `kind` atomically (a locked temporary with a random
/// name, then a rename). Whatever is not a regular file under the entry's name (a
/// FIFO, a link, a directory) is removed first.
pub fn write_entry(
    dir: &Path,
    key: &str,
    kind: &str,
    payload: &[u8],
    log: &str,
) -> std::result::Result<(), fragmask_masks::MaskError> {
    let io = |path: &Path, e: std::io::Error| fragmask_masks::MaskError::Io {
        action: "writing",
        path: path.display().to_string(),
        message: e.to_string(),
    };
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let path = dir.join(entry_file_name(key, kind));
    if let Ok(meta) = fs::symlink_metadata(&path) {
        if meta.file_type().is_dir() {
            fs::remove_dir_all(&path).map_err(|e| io(&path, e))?;
        } else if !meta.file_type().is_file() {
            fs::remove_file(&path).map_err(|e| io(&path, e))?;
        }
    }
    fragmask_masks::io::write_file_atomically(&path, &encode_entry(key, kind, payload, log))
}

/// The entry for `key` and `kind` in `dir`, or `compile()`'s result, stored. A
/// defective entry is compiled again and replaced; the repair is in the status and
/// in the journal ([`take_repairs`]). With `dir` `None` this only compiles.
pub fn get_or_compile<E>(
    dir: Option<&Path>,
    key: &str,
    kind: &str,
    compile: impl FnOnce() -> std::result::Result<Entry, E>,
) -> std::result::Result<(Entry, CacheStatus), E> {
    let Some(dir) = dir else {
        return compile().map(|entry| (entry, CacheStatus::Disabled));
    };
    let defect = match read_entry(dir, key, kind) {
        Lookup::Hit(entry) => return Ok((entry, CacheStatus::Hit)),
        Lookup::Miss => None,
        Lookup::Defective(d) => Some(d),
    };
    let entry = compile()?;
    let stored = write_entry(dir, key, kind, &entry.payload, &entry.log).map_err(|e| e.to_string());
    let status = match (defect, stored) {
        (None, Ok(())) => CacheStatus::Stored,
        (None, Err(e)) => CacheStatus::StoreFailed(e),
        (Some(defect), stored) => {
            let repair = CacheRepair {
                path: dir.join(entry_file_name(key, kind)),
                defect,
                store_error: stored.err(),
            };
            journal(&repair);
            CacheStatus::Repaired(repair)
        }
    };
    Ok((entry, status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_on_every_input() {
        let opts = vec!["--gpu-architecture=sm_90a".to_string()];
        let base = cache_key("cubin", (13, 0), &opts, "src");
        assert_eq!(base.len(), 64);
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
    fn sha256_of_the_empty_string_is_the_standard_value() {
        // FIPS 180-4 test vector.
        assert_eq!(
            hex(&Sha256::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn encoded_entries_decode_to_their_content_and_only_under_their_key_and_kind() {
        let key = "a".repeat(64);
        let bytes = encode_entry(
            &key,
            "cubin",
            b"\x7fELF payload",
            "ptxas info: 42 registers",
        );
        assert_eq!(
            decode_entry(&bytes, &key, "cubin"),
            Ok(Entry {
                payload: b"\x7fELF payload".to_vec(),
                log: "ptxas info: 42 registers".into()
            })
        );
        let other = "b".repeat(64);
        assert_eq!(
            decode_entry(&bytes, &other, "cubin"),
            Err(Defect::ForeignKey { found: key.clone() })
        );
        assert_eq!(
            decode_entry(&bytes, &key, "ptx"),
            Err(Defect::WrongKind {
                found: "cubin".into()
            })
        );
    }
}
