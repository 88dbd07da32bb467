//! Issue 10 regressions of `fragmask layout`, run as a user would: options after the
//! expression are options (class 8), negative numbers are still values, and
//! left_inverse says where CuTe's implementations differ (class 10). Each run happens
//! in a fresh empty directory, which must stay empty.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh empty directory for one run.
fn fresh_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fragmask-reliability-layout-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `fragmask ARGS` in a fresh directory; asserts it left no file there.
fn fragmask(args: &[&str]) -> Output {
    let dir = fresh_dir();
    let output = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("run fragmask");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "fragmask {args:?} left {left:?}");
    std::fs::remove_dir(&dir).unwrap();
    output
}

fn ok_stdout(args: &[&str]) -> String {
    let output = fragmask(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "fragmask {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let stdout = ok_stdout(args);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn json_after_the_expression_is_the_option_not_part_of_it() {
    let expr = "logical_divide((4,2,3):(2,1,8), 4:2)";
    let before = json_of(&["layout", "--json", expr]);
    let after = json_of(&["layout", expr, "--json"]);
    assert_eq!(before, after);
    assert_eq!(after["expr"], expr);
    assert_eq!(after["result"], "((2,2),(2,3)):((4,1),(2,8))");
    // Several words, then the option.
    let words = json_of(&["layout", "size((4,8):(8,1))", "--json"]);
    assert_eq!(words["value"], 32);
    // --table after the expression too.
    let table = ok_stdout(&["layout", "(2,3):(3,1)", "--table"]);
    assert!(table.contains("| 0 | 1 | 2 |"), "{table}");
    assert_eq!(table.lines().last(), Some("(2,3):(3,1)"));
}

#[test]
fn negative_numbers_in_the_expression_are_values() {
    // A whole expression that is a negative number, and one word of several.
    let minus_one = json_of(&["layout", "-1", "--json"]);
    assert_eq!(
        (&minus_one["kind"], &minus_one["value"]),
        (&"int".into(), &(-1).into())
    );
    assert_eq!(ok_stdout(&["layout", "eval(4:-3,", "3)"]).trim(), "-9");
    // The word -1 reaches the calculator (whose message is about the index, not clap).
    let output = fragmask(&["layout", "eval(4:-3,", "-1", ")"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("eval: the index must be non-negative"),
        "{stderr}"
    );
    assert_eq!(
        ok_stdout(&["layout", "(4,2):(1,-1)", "--json"])
            .lines()
            .last()
            .map(|l| l.contains(r#""stride":[1,-1]"#)),
        Some(true)
    );
    // After `--` every word is part of the expression.
    assert_eq!(ok_stdout(&["layout", "--", "2:-1"]).trim(), "2:-1");
}

#[test]
fn a_word_starting_with_a_dash_that_is_no_number_is_refused_with_a_hint() {
    let output = fragmask(&["layout", "eval(4:1,", "-2),", "1)"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    // clap names the flag it read ('-2') and how to pass it as a value.
    assert!(stderr.contains("unexpected argument '-2'"), "{stderr}");
    assert!(stderr.contains("use '-- "), "{stderr}");
}

#[test]
fn left_inverse_names_pycutes_answer_where_it_differs() {
    // fragmask and CuTe C++ (CUTLASS >= 3.9): the mixed radix of L's strides.
    let output = fragmask(&["layout", "left_inverse((1,2,4):(4,1,8))", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(json["result"], "(8,4):(1,2)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("note: left_inverse((1,2,4):(4,1,8)) = (8,4):(1,2) is CuTe C++'s")
            && stderr.contains("pycute and older CuTe give (2,4,4):(1,8,2)"),
        "{stderr}"
    );
    // Where both agree (a compact L) there is no note.
    let output = fragmask(&["layout", "left_inverse((4,8):(8,1))"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "(8,4):(4,1)"
    );
    assert!(
        output.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn left_inverse_errors_name_the_condition_that_fails() {
    // Injective, but 3 is no multiple of 2: the divisibility condition, not "not
    // injective" as before.
    let output = fragmask(&["layout", "left_inverse((3,2):(2,3))"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("left_inverse: CuTe's divisibility condition does not hold (sorted by stride, each stride must be a multiple of the one below it"),
        "{stderr}"
    );
    // Not injective: coordinates (2,0) and (0,1) both give offset 2.
    let output = fragmask(&["layout", "left_inverse((3,2):(1,2))"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "left_inverse: the layout is not injective (two indices give the same offset"
        ),
        "{stderr}"
    );
}
