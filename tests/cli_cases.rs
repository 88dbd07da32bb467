//! The device scripts' case list (`bench/suite/cli_cases.sh`: the calls `sanitize.sh` runs
//! under compute-sanitizer and `layouts.sh` compares across output layouts) is built and
//! every call is accepted by the CLI: exit 0 where a GPU ran it, 3 where the inputs were
//! checked and no GPU was found. A stale flag or a conflict the CLI refuses before the GPU
//! then fails here, not on a lent machine.

#[path = "support/temp_dir.rs"]
mod temp_dir;

use std::process::Command;

/// `(name, arguments)` of every case, from the script run with this build's binary.
fn cases(bin: &str, dir: &str) -> Option<Vec<(String, Vec<String>)>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/suite/cli_cases.sh");
    let out = Command::new("bash")
        .args([
            "-c",
            "source \"$0\" && fm_cli_cases \"$1\" \"$2\" && printf '%s\\n' \"${cases[@]}\"",
            script,
            bin,
            dir,
        ])
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "bash is needed under CI=true: {e}"
            );
            println!("SKIPPED: no bash ({e})");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "cli_cases.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|line| {
                let (name, args) = line.split_once('|').expect("a case is name|arguments");
                let args = args.split_whitespace().map(str::to_string).collect();
                (name.to_string(), args)
            })
            .collect(),
    )
}

#[test]
fn every_device_script_case_passes_the_cli_s_checks() {
    let bin = env!("CARGO_BIN_EXE_fragmask");
    let dir = temp_dir::TempDir::new("cli-cases");
    let Some(cases) = cases(bin, &dir.path("cases")) else {
        return;
    };
    assert!(cases.len() >= 30, "only {} cases", cases.len());
    let (mut ran, mut checked) = (0, 0);
    for (name, args) in &cases {
        let out = Command::new(bin).args(args).output().unwrap();
        match out.status.code() {
            Some(0) => ran += 1,
            Some(3) => checked += 1,
            code => panic!(
                "case {name} ({}): exit {code:?}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    println!(
        "{} cases: {ran} ran on a GPU, {checked} checked without one",
        cases.len()
    );
}
