//! `fragmask layout EXPR`, run as a user would: the built binary on examples, bad
//! input, `--table` and `--json`.

use std::process::{Command, Output};

fn fragmask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(args)
        .output()
        .expect("run fragmask")
}

/// Runs `fragmask layout [flags] EXPR`, expects success, returns stdout.
fn layout_ok(flags: &[&str], expr: &str) -> String {
    let mut args = vec!["layout"];
    args.extend_from_slice(flags);
    args.push(expr);
    let output = fragmask(&args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.success(),
        "fragmask layout {expr} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The last line of stdout: where the result is.
fn result_of(expr: &str) -> String {
    layout_ok(&[], expr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// Runs `fragmask layout EXPR`, expects exit code 2, returns stderr.
fn layout_err(expr: &str) -> String {
    let output = fragmask(&["layout", expr]);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{expr} should fail with exit code 2; stdout {:?} stderr {stderr:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        output.stdout.is_empty(),
        "a failed expression prints nothing on stdout"
    );
    stderr
}

#[test]
fn results_match_cute_on_documented_examples() {
    let cases = [
        // CuTe's layout-algebra documentation and pycute's tests.
        (
            "composition((6,2):(8,2),(4,3):(3,1))",
            "((2,2),3):((24,2),8)",
        ),
        (
            "composition((10,2):(16,4),(5,4):(1,5))",
            "(5,(2,2)):(16,(80,4))",
        ),
        (
            "composition((12,(4,8)):(59,(13,1)), <3:4,8:2>)",
            "(3,(2,4)):(236,(26,1))",
        ),
        ("complement(4:1, 24)", "6:4"),
        ("complement(6:4, 24)", "4:1"),
        ("complement((2,2):(1,6), 24)", "(3,2):(2,12)"),
        (
            "logical_divide((4,2,3):(2,1,8), 4:2)",
            "((2,2),(2,3)):((4,1),(2,8))",
        ),
        (
            "zipped_divide((8,16):(1,8), <4:1,8:1>)",
            "((4,8),(2,2)):((1,8),(4,64))",
        ),
        (
            "tiled_divide((8,16):(1,8), <4:1,8:1>)",
            "((4,8),2,2):((1,8),4,64)",
        ),
        (
            "logical_product((2,2):(4,1), 6:1)",
            "((2,2),(2,3)):((4,1),(2,8))",
        ),
        (
            "blocked_product((2,5):(5,1), (3,4):(1,3))",
            "(6,(5,4)):(5,(1,30))",
        ),
        (
            "raked_product((2,5):(5,1), (3,4):(1,3))",
            "((3,2),(4,5)):((10,5),(30,1))",
        ),
        ("right_inverse((4,8):(8,1))", "(8,4):(4,1)"),
        ("coalesce((2,(1,6)):(1,(6,2)))", "12:1"),
        ("filter((4,2,3):(1,0,4))", "12:1"),
        // This project's fragments: FA3's wgmma accumulator, CLayout_64x16.
        ("size(((4,8,4),(2,2,2)):((128,1,16),(64,8,512)))", "1024"),
        ("cosize(((4,8,4),(2,2,2)):((128,1,16),(64,8,512)))", "1024"),
        // Thread 37, value 5 of m64n128: row 17, col 11 -> 17 + 64*11.
        (
            "eval(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)), 677)",
            "721",
        ),
        (
            "eval(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)), 37, 5)",
            "721",
        ),
        (
            "get(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)), 1, 2)",
            "16:512",
        ),
        ("rank(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)))", "2"),
        ("depth(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)))", "2"),
        (
            "flatten(((4,8,4),(2,2,16)):((128,1,16),(64,8,512)))",
            "(4,8,4,2,2,16):(128,1,16,64,8,512)",
        ),
        ("make_layout(4:1, (2,3):(4,8))", "(4,(2,3)):(1,(4,8))"),
    ];
    for (expr, expected) in cases {
        assert_eq!(result_of(expr), expected, "{expr}");
    }
}

#[test]
fn literals_default_as_cute_does() {
    // A bare shape is its compact column-major layout; an integer n is n:1.
    assert_eq!(result_of("(4,(2,3))"), "(4,(2,3)):(1,(4,8))");
    assert_eq!(result_of("composition(8:2, 4)"), "4:2");
    // In a tiler position a bare shape is by mode, as CuTe's Shape tiler.
    assert_eq!(
        result_of("zipped_divide((8,16):(1,8), (4,8))"),
        result_of("zipped_divide((8,16):(1,8), <4:1,8:1>)")
    );
    // complement's default cotarget is cosize(L), as in CuTe C++.
    assert_eq!(
        result_of("complement((2,2):(1,6))"),
        result_of("complement((2,2):(1,6), 8)")
    );
    // Whitespace is free.
    assert_eq!(
        result_of(" composition ( (6, 2) : (8, 2) , (4,3):(3,1) ) "),
        "((2,2),3):((24,2),8)"
    );
}

#[test]
fn nested_expressions_evaluate_inside_out() {
    let acc = "((4,8,4),(2,2,16)):((128,1,16),(64,8,512))";
    // Thread 0's values as a layout of their own, then coalesced.
    assert_eq!(
        result_of(&format!(
            "coalesce(composition({acc}, (1,(2,2,16)):(0,(128,256,512))))"
        )),
        "(2,2,16):(64,8,512)"
    );
    // Who holds element (row 17, col 11)? right_inverse(C)(17 + 64*11) = thread + 128*value.
    assert_eq!(
        result_of(&format!("eval(right_inverse({acc}), 721)")),
        "677"
    );
    assert_eq!(result_of("size(logical_divide(64:1, 8:1))"), "64");
    // Composing a layout with its right inverse gives the identity on the inverse's domain.
    assert_eq!(
        result_of("coalesce(composition((4,8):(8,1), right_inverse((4,8):(8,1))))"),
        "32:1"
    );
}

#[test]
fn table_prints_the_index_grid_like_print_layout() {
    let out = layout_ok(&["--table"], "(2,3):(3,1)");
    let expected = "      0   1   2 \n\
                    \x20   +---+---+---+\n\
                    \x200  | 0 | 1 | 2 |\n\
                    \x20   +---+---+---+\n\
                    \x201  | 3 | 4 | 5 |\n\
                    \x20   +---+---+---+\n\
                    (2,3):(3,1)\n";
    assert_eq!(out, expected);

    // Rows are mode 0, columns mode 1, whatever the nesting inside a mode.
    let out = layout_ok(&["--table"], "((2,2),2):((1,4),2)");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains('|')).collect();
    assert_eq!(
        rows,
        [
            " 0  | 0 | 2 |",
            " 1  | 1 | 3 |",
            " 2  | 4 | 6 |",
            " 3  | 5 | 7 |"
        ]
    );
    assert_eq!(out.lines().last(), Some("((2,2),2):((1,4),2)"));

    let stderr = layout_err_with(&["--table"], "(2,2,2):(1,2,4)");
    assert!(stderr.contains("rank-2"), "{stderr}");
    let stderr = layout_err_with(&["--table"], "size(8:1)");
    assert!(stderr.contains("needs a layout"), "{stderr}");
}

fn layout_err_with(flags: &[&str], expr: &str) -> String {
    let mut args = vec!["layout"];
    args.extend_from_slice(flags);
    args.push(expr);
    let output = fragmask(&args);
    assert_eq!(output.status.code(), Some(2), "{expr}");
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn json_describes_layouts_and_integers_for_scripts() {
    let out = layout_ok(&["--json"], "logical_divide((4,2,3):(2,1,8), 4:2)");
    let value: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(value["expr"], "logical_divide((4,2,3):(2,1,8), 4:2)");
    assert_eq!(value["kind"], "layout");
    assert_eq!(value["result"], "((2,2),(2,3)):((4,1),(2,8))");
    assert_eq!(value["shape"], serde_json::json!([[2, 2], [2, 3]]));
    assert_eq!(value["stride"], serde_json::json!([[4, 1], [2, 8]]));
    assert_eq!(value["size"], 24);
    assert_eq!(value["cosize"], 24);
    let values: Vec<i64> = serde_json::from_value(value["values"].clone()).unwrap();
    assert_eq!(values.len(), 24);
    assert_eq!(&values[..6], &[0, 4, 1, 5, 2, 6]);

    let out = layout_ok(&["--json"], "size((4,8):(8,1))");
    let value: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(value["kind"], "int");
    assert_eq!(value["result"], "32");
    assert_eq!(value["value"], 32);

    // Values are listed only up to 65536 entries.
    let out = layout_ok(&["--json"], "(512,512):(1,512)");
    let value: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(value["size"], 512 * 512);
    assert!(value.get("values").is_none());
}

#[test]
fn bad_expressions_exit_2_with_a_caret_and_what_was_expected() {
    let stderr = layout_err("composition((6,2):(8,2),(4,3):(3,1)");
    assert_eq!(
        stderr,
        "error: column 36: expected ',' or ')'\n  composition((6,2):(8,2),(4,3):(3,1)\n                                     ^\n"
    );

    let stderr = layout_err("compose(4:1, 2:1)");
    assert!(stderr.contains("unknown function 'compose'"), "{stderr}");
    assert!(stderr.contains("composition"), "{stderr}");

    let stderr = layout_err("(4,8):(1,4,2)");
    assert!(
        stderr.contains("column 7: expected a stride congruent with the shape (4,8)"),
        "{stderr}"
    );

    let stderr = layout_err("size(4:1, 2)");
    assert!(
        stderr.contains("size takes 1 argument(s), got 2"),
        "{stderr}"
    );

    let stderr = layout_err("size(4:1) junk");
    assert!(stderr.contains("expected end of input"), "{stderr}");

    let stderr = layout_err("");
    assert!(stderr.contains("expected an expression"), "{stderr}");

    let stderr = layout_err("<4:1,8:1>");
    assert!(stderr.contains("tiler"), "{stderr}");

    let stderr = layout_err("get((4,8):(1,4), 2)");
    assert!(stderr.contains("mode 2 is out of range"), "{stderr}");

    let stderr = layout_err("(4,0)");
    assert!(
        stderr.contains("shape entries must be at least 1"),
        "{stderr}"
    );
}

#[test]
fn algebra_errors_name_the_operation_and_cute_condition() {
    // A o B has no layout here: B's stride 2 splits A's mode of size 3.
    let stderr = layout_err("composition((3,4):(4,1), 2:2)");
    assert!(
        stderr.starts_with(
            "error: column 1: composition: CuTe's divisibility condition does not hold"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("\n  composition((3,4):(4,1), 2:2)\n  ^\n"),
        "{stderr}"
    );

    // The error points at the failing call inside a nested expression.
    let stderr = layout_err("size(complement((2,2):(1,3), 12))");
    assert!(
        stderr.starts_with("error: column 6: complement: CuTe's divisibility condition"),
        "{stderr}"
    );
    assert!(stderr.ends_with("\n       ^\n"), "{stderr}");

    let stderr = layout_err("left_inverse((2,2):(1,0))");
    assert!(
        stderr.contains("left_inverse: the layout is not injective"),
        "{stderr}"
    );

    let stderr = layout_err("zipped_divide((8,16):(1,8), <4:1,8:1,2:1>)");
    assert!(stderr.contains("zipped_divide:"), "{stderr}");
}
