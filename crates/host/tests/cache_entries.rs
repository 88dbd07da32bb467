//! The compile cache never serves a wrong entry: every defective entry is detected,
//! compiled again through the compile closure, replaced atomically and reported. No
//! GPU or NVRTC is needed: the "compiler" here is a closure returning fake content.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use fragmask_host::cache::{
    cache_key, decode_entry, encode_entry, entry_file_name, get_or_compile, read_entry,
    take_repairs, write_entry, CacheStatus, Defect, Entry, Lookup, MAX_ENTRY_BYTES,
};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "fragmask-cache-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn entries(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A key, and the content its "compilation" gives.
fn variant(n: u32) -> (String, Entry) {
    let source =
        format!("extern \"C\" __global__ void fragmask_attention_fwd() {{}} // variant {n}");
    let key = cache_key(
        "cubin",
        (13, 0),
        &["--gpu-architecture=sm_90a".into()],
        &source,
    );
    let entry = Entry {
        payload: format!("\x7fELF cubin of variant {n}").into_bytes(),
        log: format!("ptxas info    : Used {} registers", 100 + n),
    };
    (key, entry)
}

/// Looks `key` up, "compiling" `entry` on a miss or defect; returns the content, the
/// status and whether the compiler ran.
fn lookup(dir: &Path, key: &str, entry: &Entry) -> (Entry, CacheStatus, bool) {
    let mut compiled = false;
    let (got, status) = get_or_compile::<()>(Some(dir), key, "cubin", || {
        compiled = true;
        Ok(entry.clone())
    })
    .unwrap();
    (got, status, compiled)
}

/// Plants `damage` under `key`'s entry, then shows that the next lookup compiles
/// again, serves the right content, reports `expected` and leaves a good entry.
fn assert_repaired(
    name: &str,
    damage: impl FnOnce(&Path, &[u8]),
    expected: impl Fn(&Defect) -> bool,
) {
    let dir = TempDir::new(name);
    let (key, entry) = variant(0);
    let (_, status, _) = lookup(&dir.0, &key, &entry);
    assert_eq!(status, CacheStatus::Stored, "{name}");
    let path = dir.0.join(entry_file_name(&key, "cubin"));
    let good = fs::read(&path).unwrap();
    damage(&path, &good);
    let (got, status, compiled) = lookup(&dir.0, &key, &entry);
    assert!(compiled, "{name}: the defective entry was used");
    assert_eq!(got, entry, "{name}");
    match &status {
        CacheStatus::Repaired(r) => {
            assert!(expected(&r.defect), "{name}: {:?}", r.defect);
            assert_eq!(r.path, path);
            assert_eq!(r.store_error, None, "{name}");
            assert!(r.to_string().contains("compiled again and replaced"), "{r}");
        }
        other => panic!("{name}: {other:?}"),
    }
    // Replaced by a regular file with the right content: the next lookup is a hit.
    assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file());
    assert_eq!(fs::read(&path).unwrap(), good, "{name}");
    let (got, status, compiled) = lookup(&dir.0, &key, &entry);
    assert_eq!(
        (got, status, compiled),
        (entry, CacheStatus::Hit, false),
        "{name}"
    );
    assert_eq!(
        dir.entries(),
        [entry_file_name(&key, "cubin")],
        "{name}: left over"
    );
}

#[test]
fn a_stored_entry_is_served_without_compiling() {
    let dir = TempDir::new("hit");
    let (key, entry) = variant(1);
    let (got, status, compiled) = lookup(&dir.0, &key, &entry);
    assert_eq!(
        (got.clone(), status, compiled),
        (entry.clone(), CacheStatus::Stored, true)
    );
    let (got, status, compiled) = lookup(&dir.0, &key, &entry);
    assert_eq!((got, status, compiled), (entry, CacheStatus::Hit, false));
    assert_eq!(
        get_or_compile::<()>(None, &key, "cubin", || Ok(variant(1).1))
            .unwrap()
            .1,
        CacheStatus::Disabled
    );
}

#[test]
fn truncated_entries_are_recompiled_and_replaced() {
    for cut in [1usize, 8, 40, 67, 68, 100] {
        assert_repaired(
            &format!("truncated-{cut}"),
            |path, good| fs::write(path, &good[..good.len().saturating_sub(cut)]).unwrap(),
            |d| matches!(d, Defect::Truncated { .. }),
        );
    }
}

#[test]
fn empty_entries_are_recompiled_and_replaced() {
    assert_repaired(
        "empty",
        |path, _| fs::write(path, b"").unwrap(),
        |d| *d == Defect::Truncated { len: 0 },
    );
}

#[test]
fn zeroed_entries_are_recompiled_and_replaced() {
    assert_repaired(
        "zeroed",
        |path, good| fs::write(path, vec![0u8; good.len()]).unwrap(),
        |d| *d == Defect::BadMagic,
    );
}

#[test]
fn entries_with_trailing_bytes_are_recompiled_and_replaced() {
    assert_repaired(
        "trailing",
        |path, good| {
            let mut longer = good.to_vec();
            longer.push(0);
            fs::write(path, longer).unwrap()
        },
        |d| matches!(d, Defect::TrailingBytes { .. }),
    );
}

#[test]
fn bit_flipped_entries_are_recompiled_and_replaced() {
    // On disk, a flip in the payload and one in the log.
    for (name, from_end) in [("flip-payload", 60usize), ("flip-log", 3)] {
        assert_repaired(
            name,
            |path, good| {
                let mut bad = good.to_vec();
                let at = bad.len() - from_end;
                bad[at] ^= 0x10;
                fs::write(path, bad).unwrap()
            },
            |d| *d == Defect::DigestMismatch,
        );
    }
}

#[test]
fn every_single_bit_flip_of_an_entry_is_detected() {
    let (key, entry) = variant(2);
    let good = encode_entry(&key, "cubin", &entry.payload, &entry.log);
    assert_eq!(decode_entry(&good, &key, "cubin"), Ok(entry));
    for byte in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[byte] ^= 1 << bit;
            assert!(
                decode_entry(&bad, &key, "cubin").is_err(),
                "flip of bit {bit} of byte {byte} went unnoticed"
            );
        }
    }
}

#[test]
fn another_variants_valid_entry_is_recompiled_and_replaced() {
    // Every forward kernel has the same entry name, so a foreign entry would load:
    // the key recorded in the entry tells it apart.
    let (other_key, other) = variant(7);
    let foreign = encode_entry(&other_key, "cubin", &other.payload, &other.log);
    assert_repaired(
        "foreign",
        |path, _| fs::write(path, &foreign).unwrap(),
        |d| {
            *d == Defect::ForeignKey {
                found: other_key.clone(),
            }
        },
    );
    // The same key's PTX entry under the cubin's name.
    let (key, entry) = variant(0);
    let ptx = encode_entry(&key, "ptx", &entry.payload, &entry.log);
    assert_repaired(
        "wrong-kind",
        |path, _| fs::write(path, &ptx).unwrap(),
        |d| {
            *d == Defect::WrongKind {
                found: "ptx".into(),
            }
        },
    );
}

#[test]
fn an_entry_of_the_older_format_is_recompiled_and_replaced() {
    // Version 1 stored the raw cubin; a raw ELF has no magic.
    assert_repaired(
        "old-format",
        |path, _| {
            fs::write(
                path,
                b"\x7fELF\x02\x01\x01 raw cubin of an older version".repeat(3),
            )
            .unwrap()
        },
        |d| *d == Defect::BadMagic,
    );
}

#[test]
fn a_fifo_is_replaced_without_blocking() {
    assert_repaired(
        "fifo",
        |path, _| {
            fs::remove_file(path).unwrap();
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: mkfifo reads the NUL-terminated path `c` owns for the call.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        },
        |d| *d == Defect::NotRegularFile("a FIFO"),
    );
}

#[test]
fn a_symlink_to_dev_zero_is_replaced_without_reading_it() {
    assert_repaired(
        "symlink",
        |path, _| {
            fs::remove_file(path).unwrap();
            std::os::unix::fs::symlink("/dev/zero", path).unwrap();
        },
        |d| *d == Defect::NotRegularFile("a symbolic link"),
    );
}

#[test]
fn a_directory_under_the_entry_name_is_replaced() {
    assert_repaired(
        "directory",
        |path, _| {
            fs::remove_file(path).unwrap();
            fs::create_dir_all(path.join("inner")).unwrap();
        },
        |d| *d == Defect::NotRegularFile("a directory"),
    );
}

#[test]
fn a_huge_sparse_entry_is_refused_by_its_length() {
    assert_repaired(
        "huge",
        |path, _| {
            let f = fs::OpenOptions::new().write(true).open(path).unwrap();
            f.set_len(1 << 30).unwrap();
        },
        |d| *d == Defect::TooLarge { len: 1 << 30 },
    );
    const { assert!(1 << 30 > MAX_ENTRY_BYTES) };
}

#[test]
fn repairs_reach_the_journal() {
    let dir = TempDir::new("journal");
    let (key, entry) = variant(3);
    lookup(&dir.0, &key, &entry);
    let path = dir.0.join(entry_file_name(&key, "cubin"));
    fs::write(&path, b"garbage").unwrap();
    lookup(&dir.0, &key, &entry);
    // Other tests of this binary repair too: find ours.
    let repairs = take_repairs();
    assert!(
        repairs
            .iter()
            .any(|r| r.path == path && r.defect == Defect::BadMagic),
        "{repairs:?}"
    );
}

#[test]
fn a_failed_compilation_leaves_the_entry_alone_and_returns_the_error() {
    let dir = TempDir::new("fail");
    let (key, _) = variant(4);
    let path = dir.0.join(entry_file_name(&key, "cubin"));
    fs::write(&path, b"garbage").unwrap();
    let r = get_or_compile(Some(&dir.0), &key, "cubin", || Err("no NVRTC"));
    assert_eq!(r, Err("no NVRTC"));
    assert_eq!(
        read_entry(&dir.0, &key, "cubin"),
        Lookup::Defective(Defect::BadMagic)
    );
}

#[test]
fn abandoned_cache_temporaries_are_removed_by_the_next_write_and_live_ones_kept() {
    let dir = TempDir::new("temporaries");
    // Left by a writer killed mid-write (its PID is irrelevant: nobody holds its lock).
    let abandoned = ".fragmask-tmp-1-0123456789abcdef";
    fs::write(dir.0.join(abandoned), b"half an entry").unwrap();
    // A live writer in another PID namespace with the same PID: it holds its lock.
    let live = format!(".fragmask-tmp-{}-fedcba9876543210", std::process::id());
    fs::write(dir.0.join(&live), b"being written").unwrap();
    let held = fs::File::open(dir.0.join(&live)).unwrap();
    // SAFETY: flock on a descriptor `held` owns; no memory is passed.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    let (key, entry) = variant(5);
    write_entry(&dir.0, &key, "cubin", &entry.payload, &entry.log).unwrap();
    let mut expected = vec![live, entry_file_name(&key, "cubin")];
    expected.sort();
    assert_eq!(dir.entries(), expected);
    drop(held);
}

const CHILD_DIR: &str = "FRAGMASK_TEST_CACHE_CHILD_DIR";
const CHILD_NAME: &str = "FRAGMASK_TEST_CACHE_CHILD_NAME";

/// One of the concurrent writers of `concurrent_writers_in_separate_pid_namespaces_never_tear_an_entry`.
#[test]
#[ignore = "a child process of concurrent_writers_in_separate_pid_namespaces_never_tear_an_entry"]
fn cache_writer_child() {
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR).expect("run only as a child"));
    let name = std::env::var(CHILD_NAME).unwrap();
    println!("writer {name}: pid {}", std::process::id());
    for round in 0..60u32 {
        for n in 0..4 {
            let (key, entry) = variant(n);
            // Both writers rewrite the same entries; every read must find a whole one.
            write_entry(&dir, &key, "cubin", &entry.payload, &entry.log).unwrap();
            match read_entry(&dir, &key, "cubin") {
                Lookup::Hit(got) => assert_eq!(got, entry),
                other => panic!("round {round}: {other:?}"),
            }
        }
        // An output of its own beside them: the other writer's clean-up must not touch
        // this writer's live temporary.
        let out = dir.join(format!("out{name}"));
        let content = format!("{name} {round}").repeat(1000);
        fragmask_masks::io::write_file_atomically(&out, content.as_bytes()).unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), content);
    }
}

#[test]
fn concurrent_writers_in_separate_pid_namespaces_never_tear_an_entry() {
    let dir = TempDir::new("namespaces");
    let exe = std::env::current_exe().unwrap();
    let test_args = [
        "--exact",
        "cache_writer_child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ];
    let namespaces = Command::new("unshare")
        .args(["-pf", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !namespaces {
        // Said plainly: the writers then run in this PID namespace, with distinct PIDs;
        // the same-PID clean-up rule is proven by the masks crate's unit test
        // only_unlocked_temporaries_are_removed_whatever_their_pid.
        println!(
            "unshare -pf --mount-proc is not permitted here: writers share this PID namespace"
        );
    }
    let spawn = |name: &str| {
        let mut cmd = if namespaces {
            let mut c = Command::new("unshare");
            c.args(["-pf", "--mount-proc"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(test_args)
            .env(CHILD_DIR, &dir.0)
            .env(CHILD_NAME, name)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn("A");
    let b = spawn("B");
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("1 passed"), "{stdout}");
        if namespaces {
            // Both writers are PID 1, each in its own namespace.
            assert!(stdout.contains(": pid 1\n"), "{stdout}");
        }
    }
    let mut expected: Vec<String> = (0..4)
        .map(|n| entry_file_name(&variant(n).0, "cubin"))
        .collect();
    expected.extend(["outA".to_string(), "outB".to_string()]);
    expected.sort();
    assert_eq!(
        dir.entries(),
        expected,
        "no temporary and no torn entry left"
    );
}
