//! Output files: the one mechanism every writer of the workspace uses.
//!
//! [`write_atomically`] writes through a temporary file beside the destination and a
//! rename, so a reader sees the old file or the whole new one, never a part:
//!
//! - an existing destination that is not a regular file (a device, FIFO, directory,
//!   or a link to one) is refused, so `-o /dev/null` run as root cannot replace the
//!   device ([`check_output`]); so is a destination that is one of the inputs;
//! - the temporary is created like any new file, mode `0666` less the umask, and
//!   is synced before the rename;
//! - its name, `.fragmask-tmp-<pid>-<16 hex digits>`, is at most 41 bytes whatever
//!   the destination's name, so any legal name (up to `NAME_MAX`) can be written; the
//!   16 hex digits are 64 random bits (`getrandom`), so two writers that have the same
//!   PID in different PID namespaces (two containers sharing a volume) never collide;
//! - the writer holds an exclusive `flock` on its temporary from before the temporary
//!   gets that name (it is created as `.fragmask-tmp-new-<16 hex digits>`, locked,
//!   then renamed) until after the rename onto the destination;
//! - it is removed on every error path (a drop guard, so a panic too) and, through
//!   [`remove_live_temporaries`] called from the program's signal handler, on
//!   SIGINT and SIGTERM; it is never named in an error (errors name the destination);
//! - a temporary whose writer is gone (SIGKILL, power loss, a Python process ended by a
//!   signal) holds no lock any more, and is removed by the next write into the same
//!   directory ([`remove_stale_temporaries`]); PIDs are never compared, since they mean
//!   nothing across PID namespaces; a writer whose `new` file is taken for abandoned in
//!   the instant before its lock starts over under another name.

use std::ffi::{CString, OsStr};
use std::fs;
use std::path::{Path, PathBuf};
use std::string::{String, ToString};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use std::{format, ptr};

use crate::MaskError;

/// Prefix of every temporary file name.
pub const TEMP_PREFIX: &str = ".fragmask-tmp-";

/// Where locks are not supported (some network file systems), an unlocked temporary
/// counts as abandoned only once unmodified this long.
const STALE_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// Longest file name most file systems take (Linux `NAME_MAX`).
const NAME_MAX: usize = 255;

/// Refuses `path` as an output when it exists and is not a regular file (after
/// following links), when it is the same file (device and inode) as one of `inputs`,
/// when its directory does not exist (or is no directory), or when its name is longer
/// than `NAME_MAX` bytes. Cheap: call it before the expensive work, so a refused run
/// costs nothing.
pub fn check_output<P: AsRef<Path>>(path: &Path, inputs: &[P]) -> Result<(), MaskError> {
    let refuse = |reason: String| MaskError::OutputRefused {
        path: path.display().to_string(),
        reason,
    };
    let Some(name) = path.file_name() else {
        return Err(refuse("not a file name".into()));
    };
    if name.len() > NAME_MAX {
        return Err(refuse(format!(
            "its name is {} bytes; file names are at most {NAME_MAX}",
            name.len()
        )));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(refuse(format!("{} is not a directory", dir.display()))),
        Err(e) => return Err(refuse(format!("its directory {}: {e}", dir.display()))),
    }
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        // Absent (or a dangling link, which the rename replaces): nothing to protect.
        Err(_) => return Ok(()),
    };
    if !meta.is_file() {
        return Err(refuse(format!(
            "it exists and is {}, not a regular file",
            kind(&meta.file_type())
        )));
    }
    for input in inputs {
        let input = input.as_ref();
        if let Ok(m) = fs::metadata(input) {
            if same_file(&meta, &m) {
                return Err(refuse(format!(
                    "it is the input {}; choose another output name",
                    input.display()
                )));
            }
        }
    }
    Ok(())
}

/// Writes `path` through a temporary file in the same directory and a rename: either
/// the whole file appears or nothing changes. `write` fills the temporary, which
/// exists (empty, mode `0666` less the umask, locked by this writer) when it is
/// called; `write` opens it by name and writes it in place (it must not remove and
/// recreate it: the lock is on that file). Errors name `path`, never the temporary.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), MaskError>,
) -> Result<(), MaskError> {
    check_output::<&Path>(path, &[])?;
    let io = |action: &'static str, e: std::io::Error| MaskError::Io {
        action,
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    remove_stale_temporaries(dir);
    let guard = TempFile::create(dir).map_err(|e| io("writing", e))?;
    let tmp_shown = guard.path.display().to_string();
    write(&guard.path).map_err(|e| match e {
        // The writer knows only the temporary; report the user's path.
        MaskError::Io {
            action,
            path: p,
            message,
        } if p == tmp_shown => MaskError::Io {
            action,
            path: path.display().to_string(),
            message,
        },
        other => other,
    })?;
    fs::File::open(&guard.path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io("writing", e))?;
    // Checked again: the destination may have changed during the write.
    check_output::<&Path>(path, &[])?;
    fs::rename(&guard.path, path).map_err(|e| io("writing", e))?;
    guard.renamed();
    // Persist the rename too (best effort: some file systems refuse to sync a directory).
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// [`write_atomically`] for bytes already in memory.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<(), MaskError> {
    write_atomically(path, |tmp| {
        fs::write(tmp, bytes).map_err(|e| MaskError::Io {
            action: "writing",
            path: tmp.display().to_string(),
            message: e.to_string(),
        })
    })
}

/// Removes, from `dir`, temporaries of [`write_atomically`] that no writer will
/// finish: a `.fragmask-tmp-<pid>-<hex>` or `.fragmask-tmp-new-<hex>` that no process
/// holds a lock on (its writer is gone, whatever its PID says). A writer whose `new`
/// file is removed in the instant between its creation and its lock notices at the
/// rename and starts over under another name. Where the file system refuses locks, an
/// unlocked temporary is removed only once unmodified for a day. Only regular files whose whole name matches the
/// pattern are touched; errors are ignored (it is housekeeping, and a file another
/// process removes first is fine).
pub fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        if parse_temp_name(&entry.file_name()).is_none() {
            continue;
        }
        let path = entry.path();
        // Not following links, not blocking on a FIFO: only a regular file is a candidate.
        let Ok(file) = open_no_follow(&path) else {
            continue;
        };
        let Ok(meta) = file.metadata() else {
            continue;
        };
        if !meta.file_type().is_file() {
            continue;
        }
        let age = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or(Duration::ZERO);
        // Either kind of name: a `new` one whose writer has not locked it yet is taken
        // too, and that writer, finding its file gone at the rename, takes another name.
        let stale = match lock(&file, false) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(_) => age > STALE_AGE,
        };
        // Still the file that was examined (and locked): not renamed away meanwhile.
        if stale && fs::symlink_metadata(&path).is_ok_and(|m| same_file(&m, &meta)) {
            let _ = fs::remove_file(&path);
        }
    }
}

/// Opens `path` read-only without following a final symbolic link and without
/// blocking on a FIFO.
fn open_no_follow(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// An exclusive `flock` on `file`: waits for it (`wait`) or fails at once with
/// `WouldBlock` when another open file holds it. Released when the file is closed
/// (flock(2); the lock belongs to the open file, so it holds across PID namespaces).
fn lock(file: &fs::File, wait: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let operation = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    loop {
        // SAFETY: flock takes a descriptor that `file` owns and keeps open for the call;
        // no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Removes every temporary file that a [`write_atomically`] of this process has open,
/// and forgets them. Async-signal-safe (atomic swaps and `unlink` only, no allocation
/// or lock), for a SIGINT / SIGTERM handler that then ends the process; the names are
/// not freed.
pub fn remove_live_temporaries() {
    for slot in &LIVE {
        let p = slot.swap(ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            unlink(p);
        }
    }
}

/// Temporaries being written, as C strings for the signal handler (a fixed table: the
/// handler may not lock or allocate). A swap to null takes ownership, so the handler
/// and [`TempFile`] never both free or use a name after it was freed. With more than
/// this many concurrent writes the extra temporaries are still removed on errors,
/// just not on signals.
static LIVE: [AtomicPtr<libc::c_char>; 64] = [const { AtomicPtr::new(ptr::null_mut()) }; 64];

fn unlink(p: *mut libc::c_char) {
    // SAFETY: `p` came from `CString::into_raw` in `register` and this caller took it
    // out of `LIVE` with a swap, so it is a valid NUL-terminated string that nobody
    // frees meanwhile; unlink is async-signal-safe (POSIX.1-2017, 2.4.3).
    unsafe {
        libc::unlink(p);
    }
}

/// Stores `path` in a free slot of [`LIVE`]; `None` when it cannot (full table).
fn register(path: &Path) -> Option<usize> {
    use std::os::unix::ffi::OsStrExt;
    let raw = CString::new(path.as_os_str().as_bytes()).ok()?.into_raw();
    for (i, slot) in LIVE.iter().enumerate() {
        if slot
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Some(i);
        }
    }
    // SAFETY: `raw` came from `into_raw` above and was not stored anywhere.
    drop(unsafe { CString::from_raw(raw) });
    None
}

fn unregister(slot: usize) {
    let p = LIVE[slot].swap(ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: `p` came from `into_raw` in `register`; the swap took it out of the
        // table, so no one else (nor the signal handler) holds it.
        drop(unsafe { CString::from_raw(p) });
    }
}

/// A temporary file: locked while it lives, removed on drop unless renamed.
struct TempFile {
    path: PathBuf,
    slot: Option<usize>,
    keep: bool,
    /// The open file holding the `flock` (dropped, so unlocked, last).
    _locked: Option<fs::File>,
}

impl TempFile {
    /// Creates a new empty file `dir/.fragmask-tmp-<pid>-<16 random hex digits>` (mode
    /// 0666 less the umask), registered for the signal handler first: created
    /// exclusively as `.fragmask-tmp-new-<same digits>`, locked, then renamed, so a
    /// temporary under its final name is always locked while its writer lives.
    fn create(dir: &Path) -> std::io::Result<TempFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut last = None;
        for _ in 0..16 {
            let nonce = random_u64();
            let new = dir.join(format!("{TEMP_PREFIX}new-{nonce:016x}"));
            let path = dir.join(format!("{TEMP_PREFIX}{}-{nonce:016x}", std::process::id()));
            let mut file = TempFile {
                slot: register(&path),
                path,
                // Nothing of ours exists yet: the drop must not remove anything.
                keep: true,
                _locked: None,
            };
            // The signal handler removes the new name too, until the rename.
            let new_slot = NewSlot(register(&new));
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&new)
            {
                Ok(opened) => {
                    // A file system without locks still gets its temporaries, only
                    // cleaned up by age (remove_stale_temporaries).
                    let _ = lock(&opened, true);
                    if let Err(e) = fs::rename(&new, &file.path) {
                        let _ = fs::remove_file(&new);
                        // Another writer's clean-up took it for abandoned between our
                        // open and our lock (it was unlocked then): try another name.
                        if e.kind() == std::io::ErrorKind::NotFound {
                            last = Some(e);
                            continue;
                        }
                        return Err(e);
                    }
                    file.keep = false;
                    file._locked = Some(opened);
                    drop(new_slot);
                    return Ok(file);
                }
                Err(e) => {
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
    }

    fn renamed(mut self) {
        self.keep = true;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
        if let Some(slot) = self.slot {
            unregister(slot);
        }
    }
}

/// A registration of a temporary's first name, dropped once it is renamed.
struct NewSlot(Option<usize>);

impl Drop for NewSlot {
    fn drop(&mut self) {
        if let Some(slot) = self.0 {
            unregister(slot);
        }
    }
}

/// Which temporary a name is: exactly `.fragmask-tmp-<decimal pid>-<16 lowercase hex
/// digits>` (locked by its writer while it lives) or `.fragmask-tmp-new-<16 lowercase
/// hex digits>` (not yet locked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TempName {
    Locked,
    New,
}

fn parse_temp_name(name: &OsStr) -> Option<TempName> {
    let rest = name.to_str()?.strip_prefix(TEMP_PREFIX)?;
    let (head, hex) = rest.split_once('-')?;
    let decimal = |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    let lower_hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if hex.len() != 16 || !lower_hex(hex) {
        return None;
    }
    match head {
        "new" => Some(TempName::New),
        pid if decimal(pid) => Some(TempName::Locked),
        _ => None,
    }
}

/// 64 random bits from the operating system (`getrandom`); should that fail, from the
/// standard library's randomly keyed SipHash over a counter, the clock and the PID.
pub(crate) fn random_u64() -> u64 {
    if let Ok(x) = getrandom::u64() {
        return x;
    }
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.write_u32(std::process::id());
    h.finish()
}

fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

fn kind(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::sync::Mutex;
    use std::vec::Vec;

    /// The tests that write hold this: one of them removes every live temporary of the
    /// process, and some count registrations.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "fragmask-output-{name}-{}-{:016x}",
            std::process::id(),
            random_u64()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<OsString> {
        let mut v: Vec<OsString> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    }

    fn live_count() -> usize {
        LIVE.iter()
            .filter(|s| !s.load(Ordering::Acquire).is_null())
            .count()
    }

    #[test]
    fn temporary_names_fit_name_max_and_match_only_the_exact_pattern() {
        let _serial = serial();
        let dir = temp_dir("names");
        let long = "a".repeat(250);
        write_file_atomically(&dir.join(&long), b"x").unwrap();
        assert_eq!(names(&dir), [OsString::from(&long)]);
        let max = format!("{TEMP_PREFIX}{}-{:016x}", u32::MAX, u64::MAX);
        assert!(max.len() <= 41, "{max}");
        assert_eq!(
            parse_temp_name(OsStr::new(".fragmask-tmp-42-0123456789abcdef")),
            Some(TempName::Locked)
        );
        assert_eq!(
            parse_temp_name(OsStr::new(".fragmask-tmp-new-0123456789abcdef")),
            Some(TempName::New)
        );
        for bad in [
            ".fragmask-tmp-42-0123456789abcde",
            ".fragmask-tmp-42-0123456789abcdef0",
            ".fragmask-tmp-42-0123456789ABCDEF",
            ".fragmask-tmp--0123456789abcdef",
            ".fragmask-tmp-12345678901-0123456789abcdef",
            ".fragmask-tmp-4x-0123456789abcdef",
            ".fragmask-tmp-newer-0123456789abcdef",
            "fragmask-tmp-42-0123456789abcdef",
            ".out.svg.tmp-42",
        ] {
            assert_eq!(parse_temp_name(OsStr::new(bad)), None, "{bad}");
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn failed_or_panicking_writers_leave_no_file_and_no_registration() {
        let _serial = serial();
        let dir = temp_dir("fail");
        let path = dir.join("out.bin");
        let before = live_count();
        let err = write_atomically(&path, |tmp| {
            fs::write(tmp, b"half").unwrap();
            assert!(live_count() > before, "registered while writing");
            Err(MaskError::Io {
                action: "writing",
                path: tmp.display().to_string(),
                message: "disk full".into(),
            })
        })
        .unwrap_err();
        // The error names the destination, not the temporary.
        assert_eq!(
            err.to_string(),
            format!("writing {}: disk full", path.display())
        );
        assert!(names(&dir).is_empty());
        assert_eq!(live_count(), before);
        let panicked = std::panic::catch_unwind(|| {
            let _ = write_atomically(&path, |tmp| {
                fs::write(tmp, b"half").unwrap();
                panic!("writer panics");
            });
        });
        assert!(panicked.is_err());
        assert!(names(&dir).is_empty());
        assert_eq!(live_count(), before);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn non_regular_targets_and_inputs_are_refused_before_writing() {
        let _serial = serial();
        let dir = temp_dir("refuse");
        let sub = dir.join("sub");
        fs::create_dir(&sub).unwrap();
        let called = std::cell::Cell::new(false);
        let err = write_atomically(&sub, |_| {
            called.set(true);
            Ok(())
        })
        .unwrap_err();
        assert!(!called.get());
        assert!(
            matches!(&err, MaskError::OutputRefused { path, reason }
                if *path == sub.display().to_string() && reason.contains("a directory")),
            "{err}"
        );
        let link = dir.join("null");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        let err = write_file_atomically(&link, b"x").unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());

        let input = dir.join("in.npy");
        fs::write(&input, b"input").unwrap();
        let hard = dir.join("hard.npy");
        fs::hard_link(&input, &hard).unwrap();
        let err = check_output(&hard, &[&dir.join("missing"), &input]).unwrap_err();
        assert!(err.to_string().contains("it is the input"), "{err}");
        check_output(&dir.join("new"), &[&input]).unwrap();
        check_output(&dir.join("other"), &[&input]).unwrap();
        assert_eq!(fs::read(&input).unwrap(), b"input");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_umask_sets_the_mode_of_a_new_output() {
        let _serial = serial();
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("mode");
        let path = dir.join("out");
        write_file_atomically(&path, b"x").unwrap();
        // SAFETY: umask only reads and sets this process's mask; setting it back at
        // once keeps the value for other tests (they do not depend on it).
        let mask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !(mask as u32));
        fs::remove_dir_all(dir).unwrap();
    }

    /// Sets a file's modification time `age` into the past.
    fn age(path: &Path, age: Duration) {
        let file = fs::OpenOptions::new().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn only_unlocked_temporaries_are_removed_whatever_their_pid() {
        let _serial = serial();
        let dir = temp_dir("stale");
        let own = std::process::id();
        // A live writer with our own PID (as in another PID namespace) and a live
        // writer with PID 1: both hold their lock, so both stay.
        let live_same_pid = format!("{TEMP_PREFIX}{own}-0123456789abcdef");
        let live_pid_1 = format!("{TEMP_PREFIX}1-0123456789abcdef");
        // Abandoned (nobody holds a lock): removed, whatever PID they name.
        let dead_same_pid = format!("{TEMP_PREFIX}{own}-fedcba9876543210");
        let dead_pid_1 = format!("{TEMP_PREFIX}1-fedcba9876543210");
        // Not yet locked: abandoned too (a live writer would start over).
        let new_young = format!("{TEMP_PREFIX}new-0123456789abcdef");
        let new_old = format!("{TEMP_PREFIX}new-fedcba9876543210");
        let other = format!("{TEMP_PREFIX}{own}-0123");
        let mut held = Vec::new();
        for n in [
            &live_same_pid,
            &live_pid_1,
            &dead_same_pid,
            &dead_pid_1,
            &new_young,
            &new_old,
            &other,
        ] {
            fs::write(dir.join(n), b"x").unwrap();
        }
        for n in [&live_same_pid, &live_pid_1] {
            let f = fs::File::open(dir.join(n)).unwrap();
            lock(&f, true).unwrap();
            held.push(f);
        }
        age(&dir.join(&new_old), Duration::from_secs(120));
        // A locked temporary is kept even when old.
        age(&dir.join(&live_pid_1), Duration::from_secs(3 * 24 * 3600));
        let dir_like = format!("{TEMP_PREFIX}1-1111111111111111");
        fs::create_dir(dir.join(&dir_like)).unwrap();
        let link = format!("{TEMP_PREFIX}1-2222222222222222");
        std::os::unix::fs::symlink(dir.join(&dead_pid_1), dir.join(&link)).unwrap();
        remove_stale_temporaries(&dir);
        let mut expected = [live_same_pid, live_pid_1, other, dir_like, link]
            .map(OsString::from)
            .to_vec();
        expected.sort();
        assert_eq!(names(&dir), expected);
        drop(held);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn concurrent_writers_in_one_directory_all_finish() {
        // Every write first cleans up the directory, taking every unlocked temporary:
        // no writer may lose its own on the way.
        let _serial = serial();
        let dir = temp_dir("concurrent");
        std::thread::scope(|scope| {
            for t in 0..6 {
                let dir = &dir;
                scope.spawn(move || {
                    for i in 0..40 {
                        let path = dir.join(format!("out-{t}-{i}"));
                        let content = format!("{t} {i}").repeat(100);
                        write_file_atomically(&path, content.as_bytes()).unwrap();
                        assert_eq!(fs::read_to_string(&path).unwrap(), content);
                    }
                });
            }
        });
        assert_eq!(names(&dir).len(), 240);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_temporary_is_locked_while_its_writer_runs() {
        let _serial = serial();
        let dir = temp_dir("locked");
        let path = dir.join("out");
        write_atomically(&path, |tmp| {
            fs::write(tmp, b"data").unwrap();
            let other = fs::File::open(tmp).unwrap();
            let e = lock(&other, false).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
            // Another writer's clean-up leaves it alone.
            remove_stale_temporaries(&dir);
            assert!(tmp.exists());
            Ok(())
        })
        .unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"data");
        assert_eq!(names(&dir), [OsString::from("out")]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn remove_live_temporaries_unlinks_what_is_being_written() {
        let _serial = serial();
        let dir = temp_dir("live");
        let path = dir.join("out");
        let err = write_atomically(&path, |tmp| {
            fs::write(tmp, b"half").unwrap();
            remove_live_temporaries();
            assert!(!tmp.exists());
            Err(MaskError::Corrupt {
                what: "test",
                detail: "interrupted",
            })
        });
        assert!(err.is_err());
        assert!(names(&dir).is_empty());
        fs::remove_dir_all(dir).unwrap();
    }
}
