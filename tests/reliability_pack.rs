//! Reliability of `fragmask pack` and `fragmask inspect` (issue 10): bad flags and
//! files end in exit 2 with a message naming the flag or file, never a panic, an
//! abort, unbounded memory or a leftover file. Each test runs the built binary in a
//! fresh directory and lists the directory afterwards.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fragmask::masks::io::{write_npy, DType};

/// A fresh, empty directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fragmask-reliability-pack-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> String {
        std::fs::write(self.0.join(name), bytes).unwrap();
        name.to_string()
    }

    fn npy_i64(&self, name: &str, shape: &[usize], values: &[i64]) -> String {
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.write(name, &write_npy(DType::I64, shape, &data))
    }

    /// Sorted names of the directory's entries.
    fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Runs `fragmask ARGS` in the directory, with at most `memory` bytes of address
    /// space and 120 s of CPU time.
    fn run(&self, args: &[&str], memory: u64) -> (Output, Duration) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fragmask"));
        command.args(args).current_dir(&self.0);
        // SAFETY: the closure runs in the child between fork and exec; it calls only
        // setrlimit (async-signal-safe) and builds an io::Error from an errno, which
        // does not allocate.
        unsafe {
            command.pre_exec(move || {
                for (resource, value) in [(libc::RLIMIT_AS, memory), (libc::RLIMIT_CPU, 120)] {
                    let limit = libc::rlimit {
                        rlim_cur: value,
                        rlim_max: value,
                    };
                    if libc::setrlimit(resource, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let start = Instant::now();
        let output = command.output().unwrap();
        (output, start.elapsed())
    }

    /// A run that must fail: exit 2, every needle in the message, and the directory
    /// exactly as before (no output, no temporary file).
    fn fails(&self, args: &[&str], needles: &[&str]) -> String {
        let before = self.listing();
        let (out, _) = self.run(args, 4 << 30);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{args:?}: no '{needle}' in: {stderr}"
            );
        }
        assert_eq!(self.listing(), before, "{args:?} left files behind");
        stderr
    }

    /// A run that must succeed and write `out.safetensors` (nothing else).
    fn succeeds(&self, args: &[&str], memory: u64) -> (u64, Duration) {
        let before = self.listing();
        let (out, elapsed) = self.run(args, memory);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut expected = before;
        if !expected.iter().any(|n| n == "out.safetensors") {
            expected.push("out.safetensors".to_string());
            expected.sort();
        }
        assert_eq!(self.listing(), expected, "{args:?}");
        let size = std::fs::metadata(self.0.join("out.safetensors"))
            .unwrap()
            .len();
        (size, elapsed)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const GIB: u64 = 1 << 30;

/// A `.npy` whose header is `descr` and `shape_text` verbatim, followed by `data`.
fn raw_npy(descr: &str, shape_text: &str, data: &[u8]) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

// ---- class 1: sizes from flags and files use checked arithmetic ----

#[test]
fn csr_shape_flags_that_overflow_are_exit_2_naming_the_flag() {
    let d = Dir::new("csr-overflow");
    let i = d.npy_i64("i.npy", &[3], &[0, 1, 2]);
    let o = d.npy_i64("o.npy", &[2], &[0, 3]);
    let base = [
        "pack",
        "--topk",
        &i,
        "--topk-offsets",
        &o,
        "--seqlen-k",
        "10",
    ];
    let with = |extra: &[&'static str]| -> Vec<String> {
        base.iter()
            .map(|s| s.to_string())
            .chain(extra.iter().map(|s| s.to_string()))
            .chain(["-o".to_string(), "out.safetensors".to_string()])
            .collect()
    };
    let cases: [(&[&str], &str); 4] = [
        // The example: B × Sq wrapped to 0, then divided by it.
        (
            &["--batch", "4294967296", "--seqlen-q", "4294967296"],
            "--seqlen-q",
        ),
        (
            &["--batch", "4294967296", "--seqlen-q", "4294967"],
            "--batch",
        ),
        (
            &["--batch", "4", "--heads", "4611686018427387904"],
            "--heads",
        ),
        (&["--batch", "0"], "--batch"),
    ];
    for (extra, flag) in cases {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        d.fails(&args, &[flag]);
    }
}

#[test]
fn npy_shapes_whose_byte_count_overflows_are_exit_2_naming_the_file() {
    let d = Dir::new("npy-overflow");
    let m = d.write(
        "huge.npy",
        &raw_npy("|b1", "(8192, 8192, 1073741824, 256)", &[]),
    );
    let e = d.fails(
        &["pack", "--mask", &m, "-o", "out.safetensors"],
        &["huge.npy", "does not fit in 64 bits"],
    );
    assert!(!e.contains("18446744073709551615"), "{e}");
    let big = d.write(
        "entry.npy",
        &raw_npy("|b1", "(99999999999999999999999, 1)", &[]),
    );
    d.fails(
        &["pack", "--mask", &big, "-o", "out.safetensors"],
        &["entry.npy", "99999999999999999999999"],
    );
    // Block lists whose lists count overflows (max_kv 0 keeps the file empty).
    let index = d.write(
        "index.npy",
        &raw_npy("<i8", "(4294967296, 4294967296, 0)", &[]),
    );
    let num = d.npy_i64("num.npy", &[1], &[0]);
    d.fails(
        &[
            "pack",
            "--blocks",
            &index,
            "--blocks-num",
            &num,
            "--seqlen-k",
            "64",
            "-o",
            "out.safetensors",
        ],
        &["index.npy"],
    );
}

// ---- class 2: limits checked before memory is allocated ----

#[test]
fn predicate_past_the_seqlen_limit_is_refused_at_once_in_little_memory() {
    let d = Dir::new("seqlen-limit");
    let before = d.listing();
    let args = [
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "128",
        "--seqlen-k",
        "3000000000",
        "-o",
        "out.safetensors",
    ];
    let (out, elapsed) = d.run(&args, GIB);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--seqlen-k") && stderr.contains("2147483647"),
        "{stderr}"
    );
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(d.listing(), before);
}

#[test]
fn predicate_with_a_billion_keys_packs_in_memory_near_its_output() {
    // Was 15 GB and 40 s for a 94 MB file: a strip of Sk bits per row block.
    let d = Dir::new("billion-keys");
    let args = [
        "pack",
        "--predicate",
        "causal",
        "--seqlen-q",
        "128",
        "--seqlen-k",
        "1000000000",
        "-o",
        "out.safetensors",
        "--quiet",
    ];
    let (size, elapsed) = d.succeeds(&args, 2 * GIB);
    assert!(size < 100_000_000, "{size}");
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
}

#[test]
fn sparse_top_k_with_two_billion_keys_packs_in_bounded_memory() {
    // 128 queries, one key each, at Sk = 2e9: a strip of bits per row block would be
    // 32 GB; the packer reads such a source tile by tile instead.
    let d = Dir::new("topk-wide");
    let keys: Vec<i64> = (0..128).map(|q| q * 7 + 1_999_000_000).collect();
    let i = d.npy_i64("i.npy", &[128, 1], &keys);
    let args = [
        "pack",
        "--topk",
        &i,
        "--seqlen-k",
        "2000000000",
        "-o",
        "out.safetensors",
        "--quiet",
    ];
    let (size, elapsed) = d.succeeds(&args, 3 * GIB);
    assert!(size < 250_000_000, "{size}");
    assert!(elapsed < Duration::from_secs(90), "{elapsed:?}");
}

#[test]
fn thread_counts_past_the_limit_are_exit_2_and_the_limit_itself_works() {
    let d = Dir::new("threads");
    d.fails(
        &[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "256",
            "--threads",
            "100000",
            "-o",
            "out.safetensors",
        ],
        &["--threads", "1024"],
    );
    d.fails(
        &[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "256",
            "--threads=-1",
            "-o",
            "out.safetensors",
        ],
        &["--threads"],
    );
    // 1024 row blocks, 1024 threads asked for.
    d.succeeds(
        &[
            "pack",
            "--predicate",
            "causal",
            "--seqlen-q",
            "131072",
            "--seqlen-k",
            "128",
            "--threads",
            "1024",
            "-o",
            "out.safetensors",
            "--quiet",
        ],
        64 * GIB,
    );
}

// ---- class 3: the predicate parser and evaluator do not recurse without bound ----

#[test]
fn long_and_chains_and_not_runs_pack_without_deep_recursion() {
    let d = Dir::new("predicate-chains");
    let atoms = vec!["causal"; 8000].join(",");
    let nots = format!("{}causal", "!".repeat(10000));
    let ors = vec!["window=1:0"; 8000].join("|");
    for predicate in [&atoms, &nots, &ors] {
        d.succeeds(
            &[
                "pack",
                "--predicate",
                predicate,
                "--seqlen-q",
                "256",
                "-o",
                "out.safetensors",
                "--quiet",
            ],
            4 * GIB,
        );
    }
}

#[test]
fn parentheses_past_the_nesting_limit_are_exit_2_naming_the_limit() {
    let d = Dir::new("predicate-nesting");
    let nested = |n: usize| format!("{}causal{}", "(".repeat(n), ")".repeat(n));
    for n in [65, 50000] {
        let e = d.fails(
            &[
                "pack",
                "--predicate",
                &nested(n),
                "--seqlen-q",
                "256",
                "-o",
                "out.safetensors",
            ],
            &["--predicate", "limit of 64"],
        );
        assert!(
            e.len() < 1000,
            "the message quotes all the text: {} bytes",
            e.len()
        );
    }
    d.succeeds(
        &[
            "pack",
            "--predicate",
            &nested(64),
            "--seqlen-q",
            "256",
            "-o",
            "out.safetensors",
            "--quiet",
        ],
        4 * GIB,
    );
}

// ---- class 7: options that would be ignored are errors ----

#[test]
fn options_of_another_input_kind_are_exit_2_naming_the_option() {
    let d = Dir::new("ignored-options");
    let m = d.write(
        "m.npy",
        &write_npy(DType::Bool, &[128, 128], &[1; 128 * 128]),
    );
    let o = d.npy_i64("o.npy", &[2], &[0, 3]);
    let out = ["-o", "out.safetensors"];
    let cases: [(Vec<&str>, &str); 6] = [
        (vec!["--mask", &m, "--blocks-num", &o], "--blocks-num"),
        (vec!["--mask", &m, "--block-sizes", &o], "--block-sizes"),
        (vec!["--mask", &m, "--sparse-block", "32"], "--sparse-block"),
        (
            vec![
                "--predicate",
                "causal",
                "--seqlen-q",
                "8",
                "--seqlen-k",
                "8",
                "--topk-offsets",
                &o,
            ],
            "--topk-offsets",
        ),
        (
            vec!["--predicate", "causal", "--seqlen-q", "8", "--tensor", "x"],
            "--tensor",
        ),
        (vec!["--mask", &m, "--heads", "2"], "--heads"),
    ];
    for (args, flag) in cases {
        let mut full = vec!["pack"];
        full.extend(args);
        full.extend(out);
        d.fails(&full, &[flag]);
    }
}

#[test]
fn two_dimensional_offsets_and_block_sizes_are_rank_errors_naming_the_file() {
    let d = Dir::new("rank");
    let i = d.npy_i64("i.npy", &[3], &[0, 1, 2]);
    let o2 = d.npy_i64("o2.npy", &[1, 2], &[0, 3]);
    d.fails(
        &[
            "pack",
            "--topk",
            &i,
            "--topk-offsets",
            &o2,
            "--seqlen-k",
            "10",
            "-o",
            "out.safetensors",
        ],
        &["o2.npy", "2 dimensions"],
    );
    let i2 = d.npy_i64("i2.npy", &[1, 3], &[0, 1, 2]);
    let o = d.npy_i64("o.npy", &[2], &[0, 3]);
    d.fails(
        &[
            "pack",
            "--topk",
            &i2,
            "--topk-offsets",
            &o,
            "--seqlen-k",
            "10",
            "-o",
            "out.safetensors",
        ],
        &["i2.npy", "2 dimensions"],
    );
    let index = d.npy_i64("index.npy", &[1, 1], &[0]);
    let num = d.npy_i64("num.npy", &[1], &[1]);
    let sizes2 = d.npy_i64("sizes2.npy", &[1, 1], &[64]);
    d.fails(
        &[
            "pack",
            "--blocks",
            &index,
            "--blocks-num",
            &num,
            "--block-sizes",
            &sizes2,
            "-o",
            "out.safetensors",
        ],
        &["sizes2.npy", "variable_block_sizes", "2 dimensions"],
    );
    // The same inside a safetensors file of block lists.
    let tensor = |shape: Vec<usize>, values: &[i64]| {
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (shape, data)
    };
    let tensors = [
        ("q2k_block_sparse_index", tensor(vec![1, 1], &[0])),
        ("q2k_block_sparse_num", tensor(vec![1], &[1])),
        ("variable_block_sizes", tensor(vec![1, 1], &[64])),
    ];
    let views: Vec<(&str, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, (shape, data))| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::I64, shape.clone(), data)
                    .unwrap();
            (*name, view)
        })
        .collect();
    let bytes = safetensors::serialize(views, None).unwrap();
    let lists = d.write("lists.safetensors", &bytes);
    d.fails(
        &["pack", "--blocks", &lists, "-o", "out.safetensors"],
        &["lists.safetensors", "variable_block_sizes", "2 dimensions"],
    );
}

/// Packs an `n × n` all-ones mask (at 130: one full tile, three partial edge tiles) and
/// returns the file's tensors (name, shape, dtype, bytes) and metadata less checksums.
type Tensors = Vec<(String, Vec<usize>, safetensors::Dtype, Vec<u8>)>;
fn packed_file(d: &Dir, n: usize) -> (Tensors, HashMap<String, String>) {
    let m = d.write("m.npy", &write_npy(DType::Bool, &[n, n], &vec![1; n * n]));
    d.succeeds(
        &["pack", "--mask", &m, "-o", "out.safetensors", "--quiet"],
        4 * GIB,
    );
    let bytes = std::fs::read(d.0.join("out.safetensors")).unwrap();
    std::fs::remove_file(d.0.join("out.safetensors")).unwrap();
    std::fs::remove_file(d.0.join(&m)).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let tensors = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            (
                name,
                view.shape().to_vec(),
                view.dtype(),
                view.data().to_vec(),
            )
        })
        .collect();
    // Without the checksums: these tests reach the validation that guards files
    // written before checksums existed (with them, any edit is a checksum error).
    let meta = meta
        .metadata()
        .clone()
        .unwrap()
        .into_iter()
        .filter(|(k, _)| !k.starts_with(fragmask::masks::io::CHECKSUM_PREFIX))
        .collect();
    (tensors, meta)
}

fn write_packed(d: &Dir, name: &str, tensors: &Tensors, meta: &HashMap<String, String>) -> String {
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, shape, dtype, data)| {
            let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap();
            (name.clone(), view)
        })
        .collect();
    d.write(
        name,
        &safetensors::serialize(views, Some(meta.clone())).unwrap(),
    )
}

#[test]
fn inspect_rejects_metadata_that_disagrees_with_the_tensors() {
    let d = Dir::new("inspect-crosscheck");
    let (tensors, meta) = packed_file(&d, 130);
    let good = write_packed(&d, "good.safetensors", &tensors, &meta);
    let (out, _) = d.run(&["inspect", &good], 4 * GIB);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("density 100.0000%"));
    let edit = |key: &str, value: &str| {
        let mut m = meta.clone();
        m.insert(key.to_string(), value.to_string());
        m
    };
    let cases = [
        (edit("seqlen_q", "1"), "m_blocks"),
        (edit("seqlen_k", "128"), "n_blocks"),
        (edit("seqlen_k", "129"), "outside the mask"),
        (edit("batch", "2"), "batch"),
        (edit("heads", "3"), "heads"),
        (edit("heads", "x"), "not a non-negative integer"),
    ];
    for (i, (m, needle)) in cases.into_iter().enumerate() {
        let name = write_packed(&d, &format!("bad{i}.safetensors"), &tensors, &m);
        let e = d.fails(&["inspect", &name], &[&name, needle]);
        assert!(!e.contains("density"), "{e}");
    }
    // The "density 1638400%": one full 128 × 128 tile in a file that says
    // Sq = Sk = 1 (the same tile grid) would count 16384 ones in 1 element.
    let (tensors, meta) = packed_file(&d, 128);
    for (i, (key, value)) in [("seqlen_q", "1"), ("seqlen_k", "100")]
        .into_iter()
        .enumerate()
    {
        let mut m = meta.clone();
        m.insert(key.to_string(), value.to_string());
        let name = write_packed(&d, &format!("full{i}.safetensors"), &tensors, &m);
        let e = d.fails(&["inspect", &name], &[&name, "full tile sticks out"]);
        assert!(!e.contains("density"), "{e}");
    }
}

// ---- class 8: messages say what is wrong, with the file and the value ----

#[test]
fn file_format_is_told_by_magic_bytes_not_by_name() {
    let d = Dir::new("magic");
    let text = d.write("mask.npy", b"this is not an array\n");
    d.fails(
        &["pack", "--mask", &text, "-o", "out.safetensors"],
        &["mask.npy", "neither .npy", "nor safetensors"],
    );
    let npy = d.write(
        "mask.safetensors",
        &write_npy(DType::Bool, &[2, 2], &[1; 4]),
    );
    d.fails(
        &["inspect", &npy],
        &["mask.safetensors", "this is a .npy file"],
    );
    // Endless or odd inputs are refused before reading (no OOM on /dev/zero).
    d.fails(
        &["pack", "--mask", "/dev/zero", "-o", "out.safetensors"],
        &["/dev/zero", "not a regular file"],
    );
    d.fails(
        &[
            "pack",
            "--predicate",
            "doc=/dev/zero",
            "--seqlen-q",
            "4",
            "-o",
            "out.safetensors",
        ],
        &["doc=/dev/zero", "not a regular file"],
    );
    d.fails(&["inspect", "."], &["not a regular file"]);
}

#[test]
fn every_one_byte_spelling_numpy_writes_is_a_valid_mask() {
    let d = Dir::new("dtypes");
    for (i, descr) in ["|b1", "<b1", "=b1", "|u1", "<u1", "=u1", "|i1", "<i1"]
        .into_iter()
        .enumerate()
    {
        let m = d.write(
            &format!("m{i}.npy"),
            &raw_npy(descr, "(2, 2)", &[1, 0, 0, 1]),
        );
        d.succeeds(
            &["pack", "--mask", &m, "-o", "out.safetensors", "--quiet"],
            4 * GIB,
        );
    }
    let f = d.write("f.npy", &raw_npy("<f4", "(1, 1)", &[0; 4]));
    d.fails(
        &["pack", "--mask", &f, "-o", "out.safetensors"],
        &[
            "f.npy",
            "dense mask is float32, expected bool, uint8 or int8",
        ],
    );
    let big = d.write("big.npy", &raw_npy(">i8", "(1,)", &[0; 8]));
    let o = d.npy_i64("o.npy", &[2], &[0, 1]);
    d.fails(
        &[
            "pack",
            "--topk",
            &big,
            "--topk-offsets",
            &o,
            "--seqlen-k",
            "4",
            "-o",
            "out.safetensors",
        ],
        &["big.npy", "big-endian"],
    );
}

#[test]
fn packed_file_errors_print_the_values_in_the_file() {
    let d = Dir::new("values");
    let (tensors, meta) = packed_file(&d, 130);
    // Words of the right count in the wrong shape: the dimension, not "512, expected 512".
    let mut wrong = tensors.clone();
    for (name, shape, _, _) in &mut wrong {
        if name == "words" {
            *shape = vec![shape[0], shape[2], shape[1]];
        }
    }
    let name = write_packed(&d, "words.safetensors", &wrong, &meta);
    let e = d.fails(
        &["inspect", &name],
        &["words.safetensors", "words dimension 1"],
    );
    assert!(e.contains("is 2, expected 256"), "{e}");
    // Limits: the number in the file, not a saturated u64::MAX.
    let mut m = meta.clone();
    m.insert("block_m".into(), "99999999999".into());
    let name = write_packed(&d, "block.safetensors", &tensors, &m);
    let e = d.fails(&["inspect", &name], &["block.safetensors", "99999999999"]);
    assert!(!e.contains("18446744073709551615"), "{e}");
    m.insert("block_m".into(), "123456789012345678901234567890".into());
    let name = write_packed(&d, "huge.safetensors", &tensors, &m);
    d.fails(
        &["inspect", &name],
        &["huge.safetensors", "123456789012345678901234567890"],
    );
}

#[test]
fn document_id_errors_name_the_file() {
    let d = Dir::new("doc");
    d.fails(
        &[
            "pack",
            "--predicate",
            "causal,doc=missing.npy",
            "--seqlen-q",
            "8",
            "-o",
            "out.safetensors",
        ],
        &["doc=missing.npy", "reading"],
    );
    let short = d.npy_i64("short.npy", &[4], &[0, 0, 1, 1]);
    let predicate = format!("doc={short}");
    d.fails(
        &[
            "pack",
            "--predicate",
            &predicate,
            "--seqlen-q",
            "8",
            "-o",
            "out.safetensors",
        ],
        &["doc=short.npy", "--seqlen-q", "is 4, expected 8"],
    );
    let text = d.write("ids.npy", b"0 0 1 1\n");
    let predicate = format!("doc={text}");
    d.fails(
        &[
            "pack",
            "--predicate",
            &predicate,
            "--seqlen-q",
            "4",
            "-o",
            "out.safetensors",
        ],
        &["doc=ids.npy", "neither .npy"],
    );
}
