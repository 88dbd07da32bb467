//! Every command that `fragmask demo` prints and every `fragmask ...` line in README.md's
//! code blocks runs as printed: in a fresh directory holding the input files it names
//! (made here, by file name), it exits 0, or 3 where it needs the GPU this machine lacks
//! (hidden from the child), never 2. A README line followed by an `error:` line is an
//! example of an error: it must exit 2 with that message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fragmask::masks::io::{write_npy, write_safetensors, DType};

/// Splits a command line as a POSIX shell does for plain words and '…' / "…" quotes,
/// dropping a trailing `# comment` and `[optional]` words.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let (mut quote, mut in_word) = (None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out.retain(|w| !(w.starts_with('[') && w.ends_with(']')));
    out
}

/// The commands in `fragmask demo`'s output: `` `fragmask …` `` spans, else the rest of
/// a line from `fragmask ` (without the closing parenthesis of a `(fragmask …)` aside).
fn demo_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.contains("`fragmask ") {
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 && span.starts_with("fragmask ") {
                    out.push(span.to_string());
                }
            }
        } else if let Some(at) = line.find("fragmask ") {
            let mut cmd = line[at..].trim_end().to_string();
            if line[..at].ends_with('(') && cmd.ends_with(')') {
                cmd.pop();
            }
            out.push(cmd);
        }
    }
    out
}

/// README's command lines in code blocks, each with the `error:` line that follows it
/// (an example of an error), if any.
fn readme_commands(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut in_block = false;
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        let t = line.trim_start().trim_start_matches("$ ");
        if in_block && t.starts_with("fragmask ") {
            let error = lines
                .get(i + 1)
                .filter(|n| n.starts_with("error:"))
                .map(|n| n.to_string());
            out.push((t.to_string(), error));
        }
    }
    out
}

fn f32_bytes(n: usize, value: f32) -> Vec<u8> {
    std::iter::repeat_n(value.to_le_bytes(), n)
        .flatten()
        .collect()
}

fn i32_bytes(values: impl IntoIterator<Item = i32>) -> Vec<u8> {
    values.into_iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The content of an input file a printed command names, by file name (`source`:
/// "demo" or "README"); `None`: no content is known, which fails the test.
fn input_file(source: &str, name: &str, path: &Path) -> Option<()> {
    let (s, d) = (128, 128); // q, k, v: [1, 1, 128, 128]
    let bytes = match (source, name) {
        // Top-k key indices [Sq, k] below --seqlen-k 4096.
        ("demo", "idx.npy") => write_npy(
            DType::I32,
            &[256, 4],
            &i32_bytes((0..256 * 4).map(|i| (i * 37) % 4096)),
        ),
        // Block lists: 364 query blocks of 64 tokens, each keeping 2 of the 364 key blocks.
        ("README", "idx.npy") => write_npy(
            DType::I32,
            &[364, 2],
            &i32_bytes((0..364).flat_map(|b| [b, (b + 7) % 364])),
        ),
        ("README", "num.npy") => write_npy(DType::I32, &[364], &i32_bytes([2; 364])),
        (_, "mask.npy") => write_npy(DType::Bool, &[s, s], &vec![1u8; s * s]),
        (_, "q.npy" | "k.npy" | "v.npy") => {
            write_npy(DType::F32, &[1, 1, s, d], &f32_bytes(s * d, 0.25))
        }
        (_, "qkv_do.safetensors") => {
            let t = f32_bytes(s * d, 0.25);
            let shape = [1, 1, s, d];
            write_safetensors(
                path,
                &[
                    ("q", DType::F32, &shape, &t),
                    ("k", DType::F32, &shape, &t),
                    ("v", DType::F32, &shape, &t),
                    ("do", DType::F32, &shape, &t),
                ],
            )
            .unwrap();
            return Some(());
        }
        _ => return None,
    };
    std::fs::write(path, bytes).unwrap();
    Some(())
}

/// Output flags: their values are written, not read.
const OUTPUT_FLAGS: &[&str] = &["-o", "--output", "--out", "--lse-out", "--json", "--svg"];

/// Runs `commands` in order in one fresh directory; returns the failures.
fn run_all(source: &str, commands: &[(String, Option<String>)]) -> Vec<String> {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("fragmask-printed-{source}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for (line, error) in commands {
        let argv = words(line);
        assert_eq!(argv.first().map(String::as_str), Some("fragmask"), "{line}");
        for (i, w) in argv.iter().enumerate() {
            let is_output = i > 0 && OUTPUT_FLAGS.contains(&argv[i - 1].as_str());
            let is_file = [".npy", ".safetensors"].iter().any(|e| w.ends_with(e));
            if is_file
                && !is_output
                && !dir.join(w).exists()
                && input_file(source, w, &dir.join(w)).is_none()
            {
                failures.push(format!(
                    "{source}: `{line}` reads {w}: add its content to input_file"
                ));
            }
        }
        let out = Command::new(env!("CARGO_BIN_EXE_fragmask"))
            .args(&argv[1..])
            .current_dir(&dir)
            .env("CUDA_VISIBLE_DEVICES", "")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let code = out.status.code();
        match error {
            Some(e) if code == Some(2) && text.contains(e.as_str()) => {}
            Some(e) => failures.push(format!(
                "{source}: `{line}` should fail with `{e}`: exit {code:?}: {text}"
            )),
            None if matches!(code, Some(0 | 3)) => {}
            None => failures.push(format!("{source}: `{line}` exits {code:?}: {text}")),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    failures
}

#[test]
fn every_command_the_demo_prints_runs_as_printed() {
    let out = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .arg("demo")
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 3)), "{out:?}");
    let commands = demo_commands(&String::from_utf8_lossy(&out.stdout));
    assert!(commands.len() >= 5, "the demo printed {commands:?}");
    assert!(
        commands.iter().any(|c| c.starts_with("fragmask pack")),
        "{commands:?}"
    );
    let commands: Vec<_> = commands.into_iter().map(|c| (c, None)).collect();
    let failures = run_all("demo", &commands);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fragmask_command_in_the_readme_runs_as_printed() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let commands = readme_commands(&readme);
    assert!(commands.len() >= 5, "README's commands: {commands:?}");
    let failures = run_all("README", &commands);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_command_splitter_reads_quotes_comments_and_optional_words() {
    assert_eq!(
        words("fragmask layout 'a b' \"c\"d --x [--y]   # note"),
        vec!["fragmask", "layout", "a b", "cd", "--x"]
    );
    assert_eq!(
        demo_commands("  (fragmask layout 'size(4:1)')\nTry: fragmask frag --svg t.svg\n(`fragmask verify` checks)"),
        vec!["fragmask layout 'size(4:1)'", "fragmask frag --svg t.svg", "fragmask verify"]
    );
}
