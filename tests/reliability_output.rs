//! Output files (issue 10, class 6), through the built CLI as a user runs it: every
//! writer (`pack -o`, `codegen -o`, `frag --svg`) refuses non-regular targets and
//! inputs, respects the umask, takes any legal name, and leaves no temporary behind
//! after an error, a full disk, SIGINT or SIGTERM; a run after a SIGKILL removes the
//! temporary the killed run left.

use std::ffi::CString;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use fragmask::masks::io::{write_npy, DType, TEMP_PREFIX};

#[path = "support/temp_dir.rs"]
mod temp_dir;
use temp_dir::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_fragmask");

fn fragmask(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args);
    c
}

fn run(mut c: Command) -> Output {
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One cheap run of each writer, writing `out`.
fn writers(out: &Path) -> [Command; 3] {
    let o = s(out);
    [
        fragmask(&[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "256",
            "--seqlen-k",
            "256",
            "-q",
            "-o",
            o,
        ]),
        fragmask(&["codegen", "-o", o]),
        fragmask(&["frag", "--svg", o]),
    ]
}

fn mkfifo(path: &Path) {
    let c = CString::new(s(path)).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

fn dev_null_is_a_char_device() -> bool {
    std::fs::symlink_metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device()
}

#[test]
fn non_regular_outputs_are_refused_with_exit_2_and_left_intact() {
    let dir = TempDir::new("nonregular");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    // A link to /dev/null, not /dev/null itself: the tests run as root, and a
    // regression must not be able to replace the real device.
    let null = dir.join("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let before = dir.entries();
    for (target, kind) in [
        (&fifo, "a FIFO"),
        (&null, "a character device"),
        (&sub, "a directory"),
    ] {
        for writer in writers(target) {
            let out = run(writer);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(
                err.contains(&format!("refusing to write {}", target.display()))
                    && err.contains(&format!("is {kind}, not a regular file")),
                "{err}"
            );
        }
    }
    let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(kind(&fifo).is_fifo());
    assert!(kind(&null).is_symlink());
    assert!(kind(&sub).is_dir());
    assert!(std::fs::read_dir(&sub).unwrap().next().is_none());
    assert!(dev_null_is_a_char_device());
    assert_eq!(dir.entries(), before);
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = TempDir::new("input");
    let mask: Vec<u8> = (0..256 * 256).map(|i| u8::from(i % 3 == 0)).collect();
    let mask_bytes = write_npy(DType::Bool, &[256, 256], &mask);
    let m = dir.join("m.npy");
    std::fs::write(&m, &mask_bytes).unwrap();
    let hard = dir.join("hard.npy");
    std::fs::hard_link(&m, &hard).unwrap();
    let ids: Vec<u8> = (0..256i32).flat_map(|i| (i / 100).to_le_bytes()).collect();
    let ids_bytes = write_npy(DType::I32, &[256], &ids);
    let id_path = dir.join("ids.npy");
    std::fs::write(&id_path, &ids_bytes).unwrap();
    let before = dir.entries();
    let same_spelled_differently = dir.0.join(".").join("m.npy");
    let doc = format!("causal,doc={}", s(&id_path));
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (vec!["--mask", s(&m)], &m),
        (vec!["--mask", s(&m)], &same_spelled_differently),
        (vec!["--mask", s(&m)], &hard),
        (
            vec![
                "--predicate",
                &doc,
                "--seqlen-q",
                "256",
                "--seqlen-k",
                "256",
            ],
            &id_path,
        ),
    ];
    for (args, out) in cases {
        let mut c = fragmask(&["pack", "-q", "-o", s(out)]);
        c.args(&args);
        let o = run(c);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("refusing to write {}", out.display()))
                && err.contains("it is the input"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&m).unwrap(), mask_bytes);
    assert_eq!(std::fs::read(&id_path).unwrap(), ids_bytes);
    assert_eq!(dir.entries(), before);
}

#[test]
fn outputs_get_0666_less_the_umask() {
    let dir = TempDir::new("umask");
    for mask in [0o022, 0o077, 0o002] {
        for (i, mut writer) in writers(&dir.join("out")).into_iter().enumerate() {
            // SAFETY: umask is async-signal-safe, so it may run between fork and exec.
            unsafe {
                writer.pre_exec(move || {
                    libc::umask(mask);
                    Ok(())
                });
            }
            let o = run(writer);
            assert_eq!(o.status.code(), Some(0), "writer {i}: {}", stderr(&o));
            let mode = std::fs::metadata(dir.join("out"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o666 & !mask, "writer {i}, umask {mask:o}");
            assert_eq!(dir.entries(), ["out"]);
            std::fs::remove_file(dir.join("out")).unwrap();
        }
    }
}

#[test]
fn a_250_character_output_name_is_written() {
    let dir = TempDir::new("longname");
    let name = "n".repeat(250);
    for (i, writer) in writers(&dir.join(&name)).into_iter().enumerate() {
        let o = run(writer);
        assert_eq!(o.status.code(), Some(0), "writer {i}: {}", stderr(&o));
        assert_eq!(dir.entries(), [name.as_str()], "writer {i}");
        std::fs::remove_file(dir.join(&name)).unwrap();
    }
}

#[test]
fn a_full_disk_is_exit_2_naming_the_output_and_leaves_no_file() {
    let dir = TempDir::new("full");
    let out = dir.join("out");
    for (i, mut writer) in writers(&out).into_iter().enumerate() {
        // SAFETY: setrlimit and signal are async-signal-safe. With SIGXFSZ ignored, a
        // write past 4 KiB fails with EFBIG, as on a full disk.
        unsafe {
            writer.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 4096,
                    rlim_max: 4096,
                };
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = run(writer);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "writer {i}: {err}");
        assert!(
            err.contains(&format!("writing {}: File too large", out.display())),
            "writer {i}: {err}"
        );
        assert!(!err.contains(TEMP_PREFIX), "{err}");
        assert!(dir.entries().is_empty(), "writer {i}: {:?}", dir.entries());
    }
}

/// inotify on a directory: reports the creation of a file in it.
struct Watch(libc::c_int);

impl Watch {
    fn new(dir: &Path) -> Watch {
        // SAFETY: plain system calls on a valid NUL-terminated path; the descriptor is
        // owned by the Watch and closed on drop.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0);
            let c = CString::new(s(dir)).unwrap();
            assert!(libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_CREATE) >= 0);
            Watch(fd)
        }
    }

    /// Waits up to 20 ms; true when a file was created meanwhile.
    fn created(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; the read goes into a local buffer of its length.
        unsafe {
            if libc::poll(&mut p, 1, 20) <= 0 {
                return false;
            }
            let mut buf = [0u8; 4096];
            libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) > 0
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// Top-k indices that make every query row its own partial tile: a pack of `rows`
/// queries writes about `rows` x 2 KiB of words (135 MB at 65536).
fn spread_topk(dir: &TempDir, rows: usize) -> PathBuf {
    let idx: Vec<u8> = (0..rows)
        .flat_map(|q| (((q % 128) * 128) as i32).to_le_bytes())
        .collect();
    let path = dir.join(&format!("topk{rows}.npy"));
    std::fs::write(&path, write_npy(DType::I32, &[rows, 1], &idx)).unwrap();
    path
}

/// Gives the child the default SIGINT and SIGTERM dispositions. A test run started as a
/// background job of a non-interactive shell (`nohup .ci/run &`) inherits SIGINT
/// ignored, and fragmask rightly keeps an inherited SIG_IGN (src/main.rs), so without
/// this the signal tests would find no run they could interrupt.
trait WithDefaultSignals {
    fn with_default_signals(&mut self) -> &mut Self;
}

impl WithDefaultSignals for Command {
    fn with_default_signals(&mut self) -> &mut Self {
        // SAFETY: the closure runs in the child between fork and exec and only calls
        // signal(2), which is async-signal-safe; it touches no memory of the parent.
        unsafe {
            self.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                Ok(())
            })
        }
    }
}

/// Starts a large pack into `out_dir`, sends `signal` as soon as its temporary file
/// appears, and returns the exit status and the pid. Retries with a 4x larger job
/// while the run finished before the signal landed inside the write (the assertions
/// on what it left hold either way); panics if none could be interrupted.
fn interrupt_a_write(
    inputs: &TempDir,
    out_dir: &TempDir,
    signal: libc::c_int,
) -> (std::process::ExitStatus, u32) {
    let out = out_dir.join("out.safetensors");
    for rows in [4096, 16384, 65536] {
        let topk = spread_topk(inputs, rows);
        let watch = Watch::new(&out_dir.0);
        let mut child = fragmask(&[
            "pack",
            "--topk",
            s(&topk),
            "--seqlen-k",
            "16384",
            "-q",
            "-o",
            s(&out),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .with_default_signals()
        .spawn()
        .unwrap();
        let pid = child.id();
        while child.try_wait().unwrap().is_none() {
            if watch.created() {
                // SAFETY: the child is not reaped yet (try_wait said it runs), so the
                // PID is still its own.
                unsafe {
                    libc::kill(pid as libc::pid_t, signal);
                }
                break;
            }
        }
        let status = child.wait().unwrap();
        if status.signal() == Some(signal) && !out.exists() {
            return (status, pid);
        }
        // Finished first: the whole output and nothing else.
        assert!(
            status.success() || status.signal() == Some(signal),
            "{status}"
        );
        assert_eq!(out_dir.entries(), ["out.safetensors"]);
        std::fs::remove_file(&out).unwrap();
    }
    panic!("no pack could be interrupted during its write");
}

#[test]
fn sigint_or_sigterm_during_a_large_write_leaves_no_temporary() {
    let inputs = TempDir::new("signal-in");
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let out_dir = TempDir::new("signal-out");
        let (status, _) = interrupt_a_write(&inputs, &out_dir, signal);
        // Ended by the signal itself (the shell shows 130 / 143).
        assert_eq!(status.signal(), Some(signal));
        assert!(out_dir.entries().is_empty(), "{:?}", out_dir.entries());
    }
}

#[test]
fn the_temporary_of_a_killed_run_is_removed_by_the_next_run_and_nothing_else() {
    let inputs = TempDir::new("kill-in");
    let out_dir = TempDir::new("kill-out");
    let (_, pid) = interrupt_a_write(&inputs, &out_dir, libc::SIGKILL);
    // SIGKILL cannot be caught: the temporary stays, named after the dead PID (or, if
    // the kill came in the microseconds between its creation and its lock, under its
    // first name).
    let left = out_dir.entries();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with(&format!("{TEMP_PREFIX}{pid}-"))
            || left[0].starts_with(&format!("{TEMP_PREFIX}new-")),
        "{left:?}"
    );
    // Not ours to remove: a live writer's temporary (it holds its lock; its PID, 1 here,
    // means nothing across PID namespaces), and names outside the exact pattern.
    let live = format!("{TEMP_PREFIX}1-0123456789abcdef");
    let keep = [
        live.clone(),
        format!("{TEMP_PREFIX}{pid}-0123"),
        format!("{TEMP_PREFIX}{pid}-0123456789abcdef.svg"),
        "other.safetensors".to_string(),
    ];
    for k in &keep {
        std::fs::write(out_dir.join(k), b"keep").unwrap();
    }
    let held = std::fs::File::open(out_dir.join(&live)).unwrap();
    // SAFETY: flock on a descriptor `held` owns; no memory is passed.
    let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) };
    assert_eq!(locked, 0);
    let [pack, ..] = writers(&out_dir.join("next"));
    let o = run(pack);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut expected: Vec<String> = keep.to_vec();
    expected.push("next".into());
    expected.sort();
    assert_eq!(out_dir.entries(), expected);
    drop(held);
}
