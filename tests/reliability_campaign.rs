//! Regression tests for the classes of failure that the reliability campaign
//! (`scripts/campaign.py`, docs/reliability.md) found, one test per class, through the
//! built CLI as a user runs it: exit code, message naming the flag or file, and no
//! file left behind. Each runs in a fresh directory that is also the program's TMPDIR.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use fragmask::masks::io::{write_npy, DType};

#[path = "support/temp_dir.rs"]
mod temp_dir;
use temp_dir::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_fragmask");

impl TempDir {
    fn fifo(&self, name: &str) -> PathBuf {
        let path = self.join(name);
        let c = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        path
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs the CLI in `dir` (also its TMPDIR) with a 20 s watchdog: a run past it is a hang.
fn run_in(dir: &TempDir, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(&dir.0)
        .env("TMPDIR", &dir.0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("fragmask {args:?} hangs (over 20 s)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// Asserts exit 2, that stderr names every one of `names`, and that `dir` holds
/// exactly `left` afterwards (the files made for the test).
fn assert_refused(dir: &TempDir, args: &[&str], names: &[&str], left: &[&str]) {
    let out = run_in(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    for name in names {
        assert!(err.contains(name), "{args:?}: {name:?} not in: {err}");
    }
    assert_eq!(dir.entries(), left, "{args:?} left files behind");
}

#[test]
fn fifo_inputs_are_refused_at_once_not_waited_on() {
    let dir = TempDir::new("fifo");
    let fifo = dir.fifo("in.npy");
    let f = s(&fifo);
    let cases: [&[&str]; 4] = [
        &["pack", "--mask", f, "-o", "out.safetensors"],
        &["inspect", f],
        &["attention", "--q", f, "--k", f, "--v", f],
        &["bench", "packer", "--npy", f],
    ];
    for args in cases {
        assert_refused(&dir, args, &[f, "not a regular file"], &["in.npy"]);
    }
    assert_refused(
        &dir,
        &[
            "pack",
            "--predicate",
            &format!("doc={f}"),
            "--seqlen-q",
            "8",
            "--seqlen-k",
            "8",
            "-o",
            "out.safetensors",
        ],
        &[f],
        &["in.npy"],
    );
}

#[test]
fn negative_and_hyphenated_values_are_reported_against_their_flag() {
    let dir = TempDir::new("negative");
    for (args, flag) in [
        (
            &[
                "pack",
                "--predicate",
                "causal",
                "--seqlen-q",
                "-1",
                "-o",
                "o",
            ][..],
            "--seqlen-q",
        ),
        (&["pack", "--threads", "-1", "-o", "o"][..], "--threads"),
        (
            &["codegen", "--block", "-128x128", "-o", "o"][..],
            "--block",
        ),
        (&["attention", "--random", "-1,1,1,1,1,64"][..], "--random"),
        (
            &[
                "attention",
                "--random",
                "1,1,1,128,128,64",
                "--scale",
                "-inf",
            ][..],
            "--scale",
        ),
        (&["lightning", "--random", "-1,1,1,64"][..], "--random"),
        (&["bench", "lightning", "--heads", "-1"][..], "--heads"),
        (&["frag", "--thread", "-1"][..], "--thread"),
    ] {
        assert_refused(&dir, args, &[flag], &[]);
    }
}

#[test]
fn tile_and_kernel_configuration_errors_name_their_flags() {
    let dir = TempDir::new("tile");
    for (args, names) in [
        (
            &[
                "pack",
                "--predicate",
                "causal",
                "--seqlen-q",
                "8",
                "--seqlen-k",
                "8",
                "--warpgroups",
                "3",
                "-o",
                "o",
            ][..],
            &["--block 128x128", "--warpgroups 3"][..],
        ),
        (
            &["codegen", "--block", "7x128", "-o", "o.cuh"][..],
            &["--block 7x128"][..],
        ),
        (
            &["codegen", "--encoding", "bogus", "-o", "o.cuh"][..],
            &["--encoding bogus"][..],
        ),
        (&["frag", "--block-n", "7"][..], &["--block-n 7"][..]),
        (&["frag", "--thread", "256"][..], &["--thread 256"][..]),
        (
            &["bench", "sass", "--block", "0x0"][..],
            &["--block 0x0"][..],
        ),
        (
            &[
                "attention",
                "--random",
                "1,1,1,128,128,64",
                "--stages",
                "99",
            ][..],
            &["--stages 99"][..],
        ),
        (&["bench", "lightning", "--dim", "7"][..], &["--dim 7"][..]),
    ] {
        assert_refused(&dir, args, names, &[]);
    }
}

#[test]
fn benchmarks_validate_every_flag_before_looking_for_a_gpu() {
    // Exit 3 means "valid inputs, no GPU"; each of these is invalid, so exit 2 on any
    // machine, GPU or not.
    let dir = TempDir::new("bench");
    std::fs::write(
        dir.join("rank5.npy"),
        write_npy(DType::U8, &[1, 1, 1, 16, 16], &[1; 256]),
    )
    .unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    for (args, names) in [
        (
            &["bench", "packer", "--pattern", "bogus"][..],
            &["--pattern"][..],
        ),
        (
            &["bench", "packer", "--density", "1.5"][..],
            &["--density"][..],
        ),
        (&["bench", "packer", "--planes", "0"][..], &["--planes"][..]),
        (
            &["bench", "packer", "--block", "100x64"][..],
            &["--block", "100x64"][..],
        ),
        (
            // A tile with no backward accumulator (176 keys are not whole wgmma rows).
            &["bench", "packer", "--transposed", "--block", "128x176"][..],
            &["--transposed", "128x176"][..],
        ),
        (
            &["bench", "packer", "--npy", "rank5.npy"][..],
            &["rank5.npy"][..],
        ),
        (
            &["bench", "packer", "--json", "sub"][..],
            &["--json", "sub"][..],
        ),
        (&["bench", "apply", "--runs", "0"][..], &["--runs"][..]),
        (
            &["bench", "apply", "--distinct-tiles", "18446744073709551615"][..],
            &["--distinct-tiles"][..],
        ),
        (
            &["bench", "lightning", "--iters", "18446744073709551615"][..],
            &["--iters"][..],
        ),
        (
            &["bench", "lightning", "--json", "/dev/null"][..],
            &["--json", "/dev/null"][..],
        ),
    ] {
        assert_refused(&dir, args, names, &["rank5.npy", "sub"]);
    }
}

#[test]
fn outputs_that_cannot_be_created_are_refused_before_any_work() {
    let dir = TempDir::new("outdir");
    let long = "n".repeat(256);
    for out in ["nodir/out.safetensors", long.as_str()] {
        let pack = [
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "64",
            "--seqlen-k",
            "64",
            "-q",
            "-o",
            out,
        ];
        assert_refused(&dir, &pack, &[out], &[]);
        assert_refused(&dir, &["codegen", "-o", out], &[out], &[]);
        assert_refused(&dir, &["frag", "--svg", out], &[out], &[]);
        assert_refused(
            &dir,
            &["bench", "apply", "--json", out],
            &["--json", out],
            &[],
        );
    }
}

#[test]
fn a_full_disk_during_a_write_leaves_nothing_and_names_the_output() {
    let dir = TempDir::new("full");
    let mut cmd = Command::new(BIN);
    cmd.args(["codegen", "-o", "full.cuh"])
        .current_dir(&dir.0)
        .env("TMPDIR", &dir.0);
    // SAFETY: between fork and exec only async-signal-safe calls (signal, setrlimit).
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("full.cuh"), "{err}");
    assert!(dir.entries().is_empty(), "{:?}", dir.entries());
}
