//! The layout calculator agrees with CuTe's semantics, checked from outside: random
//! expressions are run through the built `fragmask layout --json` and through NVIDIA's
//! pycute (the Python reference of CuTe's layout algebra, `scripts/cute_crosscheck.py`),
//! and the two results are compared as functions: the same kind, size and every value
//! `L(i)`. The CuTe notation is compared too and must match where both libraries share
//! a normal form (see `NOTATION_MAY_DIFFER`).
//!
//! left_inverse is compared for equality with CuTe C++'s (CUTLASS >= 3.9, ported in
//! the script), and with pycute's own through the calculator's note: where fragmask's
//! answer differs from pycute's (off L's image only), `fragmask layout` says so on
//! standard error and names pycute's answer, which must be pycute's exactly.
//!
//! When only fragmask refuses an expression, pycute's answer must break the
//! operation's CuTe post-condition (e.g. `R(i) == A(B(i))` for composition): pycute
//! asserts only some of CuTe's divisibility conditions. When only pycute refuses one,
//! that is a failure. Cases where both refuse are skipped.
//!
//! pycute comes from `scripts/install-pycute.sh` (PyPI's nvidia-cutlass, into
//! `.cache/py`, or `$FRAGMASK_PYCUTE_PATH`). Without it the test says
//! `SKIPPED: pycute not installed` and, under `CI=true`, fails.
//!
//! `FRAGMASK_CROSSCHECK_CASES` (default 800) and `FRAGMASK_CROSSCHECK_SEED` change the
//! random sample.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

// ---- a small deterministic RNG (SplitMix64) ----------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi_inclusive: i64) -> i64 {
        lo + self.below((hi_inclusive - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

// ---- expression trees ----------------------------------------------------------------

#[derive(Clone, Debug)]
enum Tup {
    Int(i64),
    Tuple(Vec<Tup>),
}

impl Tup {
    fn text(&self, spaced: bool) -> String {
        match self {
            Tup::Int(v) => v.to_string(),
            Tup::Tuple(items) => {
                let sep = if spaced { ", " } else { "," };
                let inner: Vec<String> = items.iter().map(|t| t.text(spaced)).collect();
                format!("({})", inner.join(sep))
            }
        }
    }
    fn json(&self) -> Value {
        match self {
            Tup::Int(v) => json!(v),
            Tup::Tuple(items) => Value::Array(items.iter().map(Tup::json).collect()),
        }
    }
    fn leaves(&self) -> Vec<i64> {
        match self {
            Tup::Int(v) => vec![*v],
            Tup::Tuple(items) => items.iter().flat_map(Tup::leaves).collect(),
        }
    }
    fn with_leaves(&self, leaves: &mut impl Iterator<Item = i64>) -> Tup {
        match self {
            Tup::Int(_) => Tup::Int(leaves.next().expect("enough leaves")),
            Tup::Tuple(items) => Tup::Tuple(items.iter().map(|t| t.with_leaves(leaves)).collect()),
        }
    }
    fn modes(&self) -> Vec<Tup> {
        match self {
            Tup::Int(_) => vec![self.clone()],
            Tup::Tuple(items) => items.clone(),
        }
    }
    fn size(&self) -> i64 {
        self.leaves().iter().product()
    }
}

/// Parses `((4,8),2)` (fixed cases only).
fn tup(text: &str) -> Tup {
    fn parse(bytes: &[u8], pos: &mut usize) -> Tup {
        if bytes[*pos] == b'(' {
            *pos += 1;
            let mut items = vec![parse(bytes, pos)];
            while bytes[*pos] == b',' {
                *pos += 1;
                items.push(parse(bytes, pos));
            }
            assert_eq!(bytes[*pos], b')');
            *pos += 1;
            Tup::Tuple(items)
        } else {
            let start = *pos;
            while *pos < bytes.len() && (bytes[*pos] == b'-' || bytes[*pos].is_ascii_digit()) {
                *pos += 1;
            }
            Tup::Int(
                std::str::from_utf8(&bytes[start..*pos])
                    .unwrap()
                    .parse()
                    .unwrap(),
            )
        }
    }
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut pos = 0;
    parse(text.as_bytes(), &mut pos)
}

#[derive(Clone, Debug)]
enum Expr {
    Int(i64),
    Shape(Tup),
    Layout(Tup, Tup),
    Tiler(Vec<Expr>),
    Op(&'static str, Vec<Expr>),
}

impl Expr {
    fn text(&self, spaced: bool) -> String {
        let list = |items: &[Expr]| {
            let sep = if spaced { ", " } else { "," };
            items
                .iter()
                .map(|e| e.text(spaced))
                .collect::<Vec<_>>()
                .join(sep)
        };
        match self {
            Expr::Int(v) => v.to_string(),
            Expr::Shape(shape) => shape.text(spaced),
            Expr::Layout(shape, stride) => {
                format!("{}:{}", shape.text(spaced), stride.text(spaced))
            }
            Expr::Tiler(items) => format!("<{}>", list(items)),
            Expr::Op(name, args) => format!("{name}({})", list(args)),
        }
    }
    fn json(&self) -> Value {
        match self {
            Expr::Int(v) => json!({ "int": v }),
            Expr::Shape(shape) => json!({ "shape": shape.json() }),
            Expr::Layout(shape, stride) => {
                json!({ "layout": { "shape": shape.json(), "stride": stride.json() } })
            }
            Expr::Tiler(items) => {
                json!({ "tiler": items.iter().map(Expr::json).collect::<Vec<_>>() })
            }
            Expr::Op(name, args) => {
                json!({ "op": name, "args": args.iter().map(Expr::json).collect::<Vec<_>>() })
            }
        }
    }
    fn op(&self) -> &'static str {
        match self {
            Expr::Op(name, _) => name,
            _ => "literal",
        }
    }
}

fn lay(shape: &str, stride: &str) -> Expr {
    Expr::Layout(tup(shape), tup(stride))
}

fn op(name: &'static str, args: Vec<Expr>) -> Expr {
    Expr::Op(name, args)
}

// ---- random generation ----------------------------------------------------------------

/// Random nesting of `leaves` (values) into a shape tree of depth <= 3.
fn nest(rng: &mut Rng, leaves: &[i64], level: usize) -> Tup {
    if leaves.len() == 1 && (level > 0 || !rng.chance(5)) {
        return Tup::Int(leaves[0]);
    }
    if level >= 2 || (level > 0 && rng.chance(60)) {
        return Tup::Tuple(leaves.iter().map(|&v| Tup::Int(v)).collect());
    }
    // Cut into contiguous groups.
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..leaves.len() {
        if rng.chance(55) {
            groups.push(&leaves[start..i]);
            start = i;
        }
    }
    groups.push(&leaves[start..]);
    if groups.len() == 1 && level == 0 {
        return Tup::Tuple(leaves.iter().map(|&v| Tup::Int(v)).collect());
    }
    Tup::Tuple(
        groups
            .into_iter()
            .map(|g| nest(rng, g, level + 1))
            .collect(),
    )
}

#[derive(Clone, Copy, PartialEq)]
enum Strides {
    /// Injective with nested-multiple strides (a permuted compact layout, maybe with gaps).
    Nice,
    /// Anything non-negative: zeros, overlaps, odd values.
    Any,
    /// May include negative strides.
    Signed,
}

/// `Nice` strides with the given chance, else `Any`.
fn mostly_nice(rng: &mut Rng, percent: u64) -> Strides {
    if rng.chance(percent) {
        Strides::Nice
    } else {
        Strides::Any
    }
}

fn random_layout(rng: &mut Rng, max_leaves: usize, max_shape: i64, strides: Strides) -> Expr {
    let n = rng.range(1, max_leaves as i64) as usize;
    let shapes: Vec<i64> = (0..n)
        .map(|_| loop {
            let s = rng.pick(&[1, 2, 2, 2, 3, 4, 4, 4, 6, 8, 8]);
            if s <= max_shape {
                break s;
            }
        })
        .collect();
    let kind = match strides {
        Strides::Nice => 0,
        Strides::Any => rng.below(10),
        Strides::Signed => rng.below(12),
    };
    let mut values = vec![0i64; n];
    if !(8..10).contains(&kind) {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut running = rng.pick(&[1, 1, 1, 2]);
        for &leaf in &order {
            values[leaf] = running;
            running *= shapes[leaf] * rng.pick(&[1, 1, 1, 2]);
        }
        if (6..8).contains(&kind) {
            values[rng.below(n as u64) as usize] = 0;
        }
        if kind >= 10 {
            let leaf = rng.below(n as u64) as usize;
            values[leaf] = -values[leaf];
        }
    } else {
        for v in values.iter_mut() {
            *v = rng.pick(&[0, 1, 1, 2, 3, 4, 5, 8, 16, 32]);
        }
    }
    let shape = nest(rng, &shapes, 0);
    let stride = shape.with_leaves(&mut values.into_iter());
    Expr::Layout(shape, stride)
}

/// A tiler for a layout of shape `shape`: a layout, an integer, a bare shape (by mode
/// in CuTe) or `<...>`, usually dividing the target.
fn random_tiler(rng: &mut Rng, shape: &Tup, product: bool) -> Expr {
    let divisor = |rng: &mut Rng, n: i64| loop {
        let d = rng.range(1, n.min(8));
        if n % d == 0 || rng.chance(10) {
            break d;
        }
    };
    match rng.below(10) {
        0..=3 => {
            let max_leaves = if product { 2 } else { 3 };
            let max_shape = if product { 4 } else { 8 };
            let strides = mostly_nice(rng, 80);
            random_layout(rng, max_leaves, max_shape, strides)
        }
        4 => Expr::Int(divisor(rng, shape.size())),
        5 if !product => {
            let modes = shape.modes();
            let k = rng.range(1, modes.len() as i64) as usize;
            Expr::Shape(Tup::Tuple(
                modes[..k]
                    .iter()
                    .map(|m| Tup::Int(divisor(rng, m.size())))
                    .collect(),
            ))
        }
        _ => {
            let modes = shape.modes();
            let k = rng.range(1, modes.len() as i64) as usize;
            Expr::Tiler(
                modes[..k]
                    .iter()
                    .map(|m| match rng.below(4) {
                        0 => Expr::Int(divisor(rng, m.size())),
                        1 => {
                            let d = divisor(rng, m.size());
                            Expr::Layout(Tup::Int(d), Tup::Int(rng.pick(&[1, 1, 2, 0])))
                        }
                        _ => random_layout(rng, 2, if product { 4 } else { 8 }, Strides::Nice),
                    })
                    .collect(),
            )
        }
    }
}

fn shape_of(expr: &Expr) -> Option<&Tup> {
    match expr {
        Expr::Layout(shape, _) => Some(shape),
        _ => None,
    }
}

/// A layout-valued argument: usually a literal, sometimes a nested operation.
fn layout_arg(rng: &mut Rng, depth: usize, max_leaves: usize, strides: Strides) -> Expr {
    if depth == 0 || rng.chance(70) {
        return random_layout(rng, max_leaves, 8, strides);
    }
    let inner = random_layout(rng, max_leaves, 8, Strides::Nice);
    // left_inverse is left out here: only its values on L's image are compared.
    match rng.below(7) {
        0 | 2 => op("coalesce", vec![inner]),
        1 => op("right_inverse", vec![inner]),
        3 => op("filter", vec![inner]),
        4 => {
            let b = random_layout(rng, 2, 4, Strides::Nice);
            op("composition", vec![inner, b])
        }
        5 => op("complement", vec![inner]),
        _ => {
            let tiler = random_tiler(rng, shape_of(&inner).unwrap(), false);
            op("logical_divide", vec![inner, tiler])
        }
    }
}

fn random_expr(rng: &mut Rng, depth: usize) -> Expr {
    let ops = [
        "coalesce",
        "coalesce_profile",
        "filter",
        "composition",
        "composition",
        "complement",
        "complement",
        "right_inverse",
        "left_inverse",
        "logical_divide",
        "logical_divide",
        "zipped_divide",
        "tiled_divide",
        "logical_product",
        "logical_product",
        "blocked_product",
        "raked_product",
        "size",
        "cosize",
        "eval",
        "eval_coord",
        "get",
        "flatten",
        "make_layout",
        "nested",
    ];
    match rng.pick(&ops) {
        "coalesce" => op("coalesce", vec![layout_arg(rng, depth, 4, Strides::Signed)]),
        "coalesce_profile" => {
            let layout = random_layout(rng, 4, 8, Strides::Signed);
            let rank = shape_of(&layout).unwrap().modes().len();
            let k = rng.range(1, rank as i64) as usize;
            op(
                "coalesce",
                vec![layout, Expr::Shape(Tup::Tuple(vec![Tup::Int(1); k]))],
            )
        }
        "filter" => op("filter", vec![layout_arg(rng, depth, 4, Strides::Any)]),
        "composition" => {
            let a = layout_arg(rng, depth, 4, Strides::Signed);
            let b = match (rng.below(3), shape_of(&a)) {
                (0, Some(shape)) => random_tiler(rng, shape, false),
                _ => {
                    let strides = mostly_nice(rng, 70);
                    layout_arg(rng, depth, 3, strides)
                }
            };
            op("composition", vec![a, b])
        }
        "complement" => {
            let layout = {
                let strides = mostly_nice(rng, 80);
                layout_arg(rng, depth, 4, strides)
            };
            if rng.chance(60) {
                let cotarget = rng.range(1, 256);
                op("complement", vec![layout, Expr::Int(cotarget)])
            } else {
                op("complement", vec![layout])
            }
        }
        name @ ("right_inverse" | "left_inverse") => {
            let strides = mostly_nice(rng, 75);
            op(name, vec![layout_arg(rng, depth, 4, strides)])
        }
        name @ ("logical_divide" | "zipped_divide" | "tiled_divide") => {
            let a = {
                let strides = mostly_nice(rng, 80);
                random_layout(rng, 4, 8, strides)
            };
            let tiler = random_tiler(rng, shape_of(&a).unwrap(), false);
            op(name, vec![a, tiler])
        }
        "logical_product" => {
            let a = {
                let strides = mostly_nice(rng, 80);
                random_layout(rng, 2, 4, strides)
            };
            let tiler = random_tiler(rng, shape_of(&a).unwrap(), true);
            op("logical_product", vec![a, tiler])
        }
        name @ ("blocked_product" | "raked_product") => {
            let a = random_layout(rng, 3, 4, Strides::Nice);
            let b = {
                let strides = mostly_nice(rng, 80);
                random_layout(rng, 2, 4, strides)
            };
            op(name, vec![a, b])
        }
        name @ ("size" | "cosize") => {
            let inner = if rng.chance(50) {
                random_expr(rng, 0)
            } else {
                layout_arg(rng, depth, 4, Strides::Any)
            };
            if matches!(
                inner.op(),
                "size" | "cosize" | "eval" | "left_inverse" | "flatten"
            ) {
                return inner;
            }
            op(name, vec![inner])
        }
        "eval" => {
            let layout = random_layout(rng, 4, 8, Strides::Signed);
            let size = shape_of(&layout).unwrap().size();
            op("eval", vec![layout, Expr::Int(rng.range(0, size - 1))])
        }
        "eval_coord" => {
            let layout = random_layout(rng, 4, 8, Strides::Any);
            let modes = shape_of(&layout).unwrap().modes();
            let coords: Vec<Tup> = modes
                .iter()
                .map(|m| {
                    if matches!(m, Tup::Tuple(_)) && rng.chance(50) {
                        let leaves: Vec<i64> =
                            m.leaves().iter().map(|&s| rng.range(0, s - 1)).collect();
                        m.with_leaves(&mut leaves.into_iter())
                    } else {
                        Tup::Int(rng.range(0, m.size() - 1))
                    }
                })
                .collect();
            let mut args = vec![layout];
            if coords.len() > 1 && rng.chance(50) {
                args.extend(coords.into_iter().map(|c| match c {
                    Tup::Int(v) => Expr::Int(v),
                    t => Expr::Shape(t),
                }));
            } else {
                args.push(match Tup::Tuple(coords) {
                    Tup::Tuple(mut c) if c.len() == 1 => match c.remove(0) {
                        Tup::Int(v) => Expr::Int(v),
                        t => Expr::Shape(t),
                    },
                    t => Expr::Shape(t),
                });
            }
            op("eval", args)
        }
        "get" => {
            let layout = random_layout(rng, 4, 8, Strides::Any);
            let rank = shape_of(&layout).unwrap().modes().len() as i64;
            op("get", vec![layout, Expr::Int(rng.range(0, rank - 1))])
        }
        "flatten" => op("flatten", vec![random_layout(rng, 4, 8, Strides::Any)]),
        "make_layout" => {
            let a = random_layout(rng, 2, 8, Strides::Any);
            let b = random_layout(rng, 2, 8, Strides::Any);
            op("make_layout", vec![a, b])
        }
        _ => {
            if depth == 0 {
                return random_expr(rng, 0);
            }
            let inner = random_expr(rng, depth - 1);
            // left_inverse is compared on L's image only and flatten's normal form differs
            // from pycute's on a bare leaf, so neither is nested.
            if matches!(
                inner.op(),
                "size" | "cosize" | "eval" | "left_inverse" | "flatten"
            ) {
                return inner;
            }
            match rng.below(6) {
                0 => op("coalesce", vec![inner]),
                1 => op("size", vec![inner]),
                2 => op("right_inverse", vec![inner]),
                3 => op("cosize", vec![inner]),
                4 => {
                    let b = random_layout(rng, 2, 4, Strides::Nice);
                    op("composition", vec![inner, b])
                }
                _ => {
                    let a = random_layout(rng, 3, 8, Strides::Nice);
                    op("composition", vec![a, inner])
                }
            }
        }
    }
}

/// Hand-picked expressions: CuTe documentation examples and this project's fragments.
fn fixed_cases() -> Vec<Expr> {
    let acc = || lay("((4,8,4),(2,2,2))", "((128,1,16),(64,8,512))");
    vec![
        op(
            "composition",
            vec![lay("(6,2)", "(8,2)"), lay("(4,3)", "(3,1)")],
        ),
        op(
            "composition",
            vec![lay("(10,2)", "(16,4)"), lay("(5,4)", "(1,5)")],
        ),
        op(
            "composition",
            vec![
                lay("(12,(4,8))", "(59,(13,1))"),
                Expr::Tiler(vec![lay("3", "4"), lay("8", "2")]),
            ],
        ),
        op("complement", vec![lay("4", "1"), Expr::Int(24)]),
        op("complement", vec![lay("6", "4"), Expr::Int(24)]),
        op("complement", vec![lay("(4,6)", "(1,4)"), Expr::Int(24)]),
        op("complement", vec![lay("(2,2)", "(1,6)"), Expr::Int(24)]),
        op("complement", vec![lay("(2,2)", "(1,6)")]),
        op(
            "logical_divide",
            vec![lay("(4,2,3)", "(2,1,8)"), lay("4", "2")],
        ),
        op(
            "logical_divide",
            vec![
                lay("(9,(4,8))", "(59,(13,1))"),
                Expr::Tiler(vec![lay("3", "3"), lay("(2,4)", "(1,8)")]),
            ],
        ),
        op(
            "zipped_divide",
            vec![
                lay("(8,16)", "(1,8)"),
                Expr::Tiler(vec![lay("4", "1"), lay("8", "1")]),
            ],
        ),
        op(
            "tiled_divide",
            vec![lay("(8,16)", "(1,8)"), Expr::Shape(tup("(4,8)"))],
        ),
        op(
            "zipped_divide",
            vec![
                lay("(64,128)", "(1,64)"),
                Expr::Tiler(vec![Expr::Int(64), Expr::Int(16)]),
            ],
        ),
        op(
            "logical_product",
            vec![lay("(2,2)", "(4,1)"), lay("6", "1")],
        ),
        op(
            "logical_product",
            vec![lay("(2,2)", "(4,1)"), lay("(4,2)", "(2,1)")],
        ),
        op(
            "logical_product",
            vec![
                lay("(2,5)", "(5,1)"),
                Expr::Tiler(vec![lay("3", "5"), lay("4", "6")]),
            ],
        ),
        op(
            "blocked_product",
            vec![lay("(2,5)", "(5,1)"), lay("(3,4)", "(1,3)")],
        ),
        op(
            "raked_product",
            vec![lay("(2,5)", "(5,1)"), lay("(3,4)", "(1,3)")],
        ),
        op("right_inverse", vec![acc()]),
        op("left_inverse", vec![acc()]),
        op(
            "right_inverse",
            vec![lay("((4,8),(2,2))", "((32,1),(16,8))")],
        ),
        op(
            "left_inverse",
            vec![lay("((4,8),(2,2,2))", "((32,1),(16,8,128))")],
        ),
        op(
            "composition",
            vec![acc(), lay("(1,(2,2,2))", "(0,(128,256,512))")],
        ),
        op(
            "coalesce",
            vec![op(
                "composition",
                vec![acc(), lay("(1,(2,2,2))", "(0,(128,256,512))")],
            )],
        ),
        op(
            "composition",
            vec![op("right_inverse", vec![acc()]), lay("(64,16)", "(1,64)")],
        ),
        op("eval", vec![acc(), Expr::Int(677)]),
        op("eval", vec![acc(), Expr::Int(37), Expr::Int(5)]),
        op("eval", vec![acc(), Expr::Shape(tup("((1,1,1),(1,0,1))"))]),
        op("size", vec![acc()]),
        op("cosize", vec![acc()]),
        op("coalesce", vec![lay("(2,(1,6))", "(1,(6,2))")]),
        op(
            "coalesce",
            vec![
                lay("((2,4),(1,8))", "((1,2),(0,8))"),
                Expr::Shape(tup("(1,1)")),
            ],
        ),
        op("filter", vec![lay("(4,2,3)", "(1,0,4)")]),
        op("get", vec![acc(), Expr::Int(1), Expr::Int(2)]),
        op("flatten", vec![acc()]),
        op("make_layout", vec![lay("(2,2)", "(1,2)"), lay("4", "4")]),
    ]
}

// ---- running both sides ---------------------------------------------------------------

/// Our answer for one expression.
enum Ours {
    /// The JSON result and standard error (notes).
    Ok(Value, String),
    Err(String),
}

fn run_ours(text: &str) -> Ours {
    let output = Command::new(env!("CARGO_BIN_EXE_fragmask"))
        .args(["layout", "--json", text])
        .output()
        .expect("run fragmask");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    match output.status.code() {
        Some(0) => {
            let stdout = String::from_utf8_lossy(&output.stdout);
            let last = stdout.lines().last().unwrap_or_default();
            Ours::Ok(
                serde_json::from_str(last)
                    .unwrap_or_else(|e| panic!("{text}: bad JSON {last:?}: {e}")),
                stderr,
            )
        }
        Some(2) => Ours::Err(stderr),
        other => {
            panic!("fragmask layout --json '{text}' exited with {other:?} (a crash?):\n{stderr}")
        }
    }
}

fn pycute_path() -> PathBuf {
    std::env::var_os("FRAGMASK_PYCUTE_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/py"))
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// Whether python and pycute can be used; under CI=true their absence is a failure.
fn pycute_available() -> bool {
    let ok = Command::new(python())
        .args(["-c", "import pycute"])
        .env("PYTHONPATH", pycute_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "pycute is not importable from {} (run scripts/install-pycute.sh); CI=true makes this a failure",
            pycute_path().display()
        );
        eprintln!("SKIPPED: pycute not installed (run scripts/test.sh)");
    }
    ok
}

fn run_pycute(cases: &[Value]) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/cute_crosscheck.py");
    let mut child = Command::new(python())
        .arg(script)
        .env("PYTHONPATH", pycute_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    let input = serde_json::to_vec(cases).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().expect("python output");
    writer.join().unwrap().expect("write to python");
    assert!(
        output.status.success(),
        "scripts/cute_crosscheck.py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cute_crosscheck.py prints a JSON array")
}

/// Root operations whose CuTe notation may differ between fragmask and pycute while the
/// function is the same. flatten: pycute flattens a bare leaf `4:1` into the 1-tuple
/// `(4):(1)`; CuTe C++ and fragmask keep `4:1`.
const NOTATION_MAY_DIFFER: &[&str] = &["flatten"];

/// fragmask's documented limits, narrower than CuTe's: composition's B (and so
/// divides) with negative strides, and results beyond 16 leaves or depth 4. Where
/// pycute computes a result there the case is listed, not failed.
const FRAGMASK_LIMITS: &[&str] = &["needs non-negative strides", "capacity exceeded"];

/// fragmask errors that name a CuTe pre-condition pycute does not (fully) assert.
const DOCUMENTED_CONDITIONS: &[&str] = &[
    "divisibility condition",
    "not injective",
    "non-negative strides",
];

#[derive(Default)]
struct Tally {
    cases: usize,
    agree: usize,
    notation_equal: usize,
    both_error: usize,
    ours_stricter: usize,
    pycute_stricter: usize,
    limitation: usize,
    off_image: usize,
    /// left_inverse: fragmask's (CuTe C++'s) answer differs from pycute's off L's image,
    /// and the calculator's note names pycute's.
    pycute_differs: usize,
}

impl Tally {
    fn row(&self, name: &str) -> String {
        format!(
            "  {name}: {} | {} ({}) | {} | {} | {} | {} | {} | {}\n",
            self.cases,
            self.agree,
            self.notation_equal,
            self.both_error,
            self.ours_stricter,
            self.limitation,
            self.pycute_stricter,
            self.off_image,
            self.pycute_differs
        )
    }

    fn add(&mut self, other: &Tally) {
        self.cases += other.cases;
        self.agree += other.agree;
        self.notation_equal += other.notation_equal;
        self.both_error += other.both_error;
        self.ours_stricter += other.ours_stricter;
        self.pycute_stricter += other.pycute_stricter;
        self.limitation += other.limitation;
        self.off_image += other.off_image;
        self.pycute_differs += other.pycute_differs;
    }
}

#[test]
fn calculator_agrees_with_pycute_on_random_expressions() {
    if !pycute_available() {
        return;
    }
    let count: usize = std::env::var("FRAGMASK_CROSSCHECK_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(800);
    let seed: u64 = std::env::var("FRAGMASK_CROSSCHECK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_CAFE);
    let mut rng = Rng(seed);
    let mut exprs = fixed_cases();
    exprs.extend((0..count).map(|_| random_expr(&mut rng, 2)));
    // left_inverse of layouts with gaps, where CuTe C++ and pycute differ off L's image.
    exprs.extend((0..count / 4).map(|_| {
        let strides = mostly_nice(&mut rng, 90);
        op("left_inverse", vec![random_layout(&mut rng, 4, 8, strides)])
    }));

    let mut texts = Vec::new();
    let mut ours = Vec::new();
    let mut inputs = Vec::new();
    for expr in &exprs {
        let text = expr.text(rng.chance(20));
        let answer = run_ours(&text);
        let ours_json = match &answer {
            Ours::Ok(v, _) if v["kind"] == "layout" => {
                json!({ "shape": v["shape"], "stride": v["stride"] })
            }
            Ours::Ok(v, _) => json!({ "int": v["value"] }),
            Ours::Err(_) => Value::Null,
        };
        inputs.push(json!({ "tree": expr.json(), "ours": ours_json }));
        texts.push(text);
        ours.push(answer);
    }
    let theirs = run_pycute(&inputs);
    assert_eq!(theirs.len(), exprs.len());

    let mut failures = Vec::new();
    let mut notes = Vec::new();
    let mut by_op: BTreeMap<&str, Tally> = BTreeMap::new();
    for ((expr, text), (ours, theirs)) in exprs.iter().zip(&texts).zip(ours.iter().zip(&theirs)) {
        let tally = by_op.entry(expr.op()).or_default();
        tally.cases += 1;
        let theirs_ok = theirs["ok"] == true;
        match ours {
            Ours::Ok(v, stderr) if theirs_ok => match compare(v, theirs, expr.op()) {
                Err(problem) => failures.push(format!("{text}\n  {problem}")),
                Ok(agreement) => {
                    if expr.op() == "left_inverse" {
                        match check_pycute_note(v, theirs, stderr) {
                            Err(problem) => failures.push(format!("{text}\n  {problem}")),
                            Ok(true) => tally.pycute_differs += 1,
                            Ok(false) => {}
                        }
                    }
                    tally.agree += 1;
                    tally.notation_equal += agreement.same_notation as usize;
                    if !agreement.same_everywhere {
                        tally.off_image += 1;
                        if let Some(broken) = theirs["root_violations"]
                            .as_array()
                            .filter(|v| !v.is_empty())
                        {
                            notes.push(format!(
                                "{text} = {}: pycute gives {}, which breaks the post-condition ({}); fragmask's meets it",
                                v["result"], theirs["result"], broken[0]
                            ));
                        } else if expr.op() == "right_inverse" {
                            notes.push(format!(
                                "{text} = {}: CuTe gives {}; L is not injective and both meet L(R(i)) == i",
                                v["result"], theirs["result"]
                            ));
                        }
                    }
                }
            },
            Ours::Err(message) if theirs_ok => {
                let documented = DOCUMENTED_CONDITIONS.iter().any(|c| message.contains(c));
                let broken = theirs["violations"]
                    .as_array()
                    .is_some_and(|v| !v.is_empty());
                let limitation = FRAGMASK_LIMITS.iter().find(|l| message.contains(*l));
                if documented && broken {
                    tally.ours_stricter += 1;
                } else if let Some(limit) = limitation {
                    tally.limitation += 1;
                    notes.push(format!(
                        "{text}: fragmask refuses ({limit}), pycute gives {}",
                        theirs["result"]
                    ));
                } else {
                    failures.push(format!(
                        "{text}\n  fragmask refused it but pycute gives {} with no broken post-condition {}\n  fragmask: {}",
                        theirs["result"],
                        theirs["violations"],
                        message.trim()
                    ));
                }
            }
            Ours::Err(_) => tally.both_error += 1,
            Ours::Ok(v, _) => {
                // pycute asserts a divisibility condition where fragmask finds a layout:
                // accepted only when pycute failed in the root operation and fragmask's
                // result meets that operation's post-condition, checked by pycute.
                let asserted = theirs["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("AssertionError"));
                let verified = theirs["at_root"] == true
                    && theirs["ours_violations"]
                        .as_array()
                        .is_some_and(|v| v.is_empty());
                if asserted && verified {
                    tally.pycute_stricter += 1;
                    notes.push(format!(
                        "{text} = {}: pycute refuses ({} in {}), fragmask's result meets the post-condition",
                        v["result"], theirs["error"], theirs["failed_op"]
                    ));
                } else {
                    failures.push(format!(
                        "{text}\n  pycute refused it ({} in {}) but fragmask gives {}; fragmask's result against the post-condition: {}",
                        theirs["error"], theirs["failed_op"], v["result"], theirs["ours_violations"]
                    ));
                }
            }
        }
    }

    let mut summary = String::from(
        "op: cases | agree (same notation) | both refuse | only fragmask refuses: pycute's result breaks CuTe's post-condition | only fragmask refuses: a documented fragmask limit | only pycute refuses: fragmask's result verified | differs, fragmask's result verified (right_inverse of a non-injective L; pycute's result wrong) | left_inverse: pycute's own answer differs off L's image (fragmask's note names it)\n",
    );
    let mut total = Tally::default();
    for (name, t) in &by_op {
        summary.push_str(&t.row(name));
        total.add(t);
    }
    summary.push_str(&total.row("total"));
    if !notes.is_empty() {
        summary.push_str("listed, not failed:\n");
        for note in &notes {
            summary.push_str(&format!("  {note}\n"));
        }
    }
    eprintln!("{summary}");
    assert!(
        failures.is_empty(),
        "{} of {} expressions disagree with pycute:\n{}\n\n{summary}",
        failures.len(),
        exprs.len(),
        failures
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The sample must exercise the algebra, not only its error paths.
    assert!(
        total.agree * 4 > total.cases * 3,
        "too few successful cases:\n{summary}"
    );
}

struct Agreement {
    /// The same CuTe notation (up to the strides of size-1 modes, which no index reaches).
    same_notation: bool,
    /// The same value at every index (false only where CuTe leaves a choice:
    /// right_inverse of a non-injective L, fragmask's result verified).
    same_everywhere: bool,
}

/// Compares two successful results as functions.
fn compare(ours: &Value, theirs: &Value, op: &str) -> Result<Agreement, String> {
    if ours["kind"] != theirs["kind"] {
        return Err(format!(
            "kinds differ: ours {} pycute {}",
            ours["result"], theirs["result"]
        ));
    }
    if ours["kind"] == "int" {
        if ours["value"] != theirs["value"] {
            return Err(format!("ours {} pycute {}", ours["value"], theirs["value"]));
        }
        return Ok(Agreement {
            same_notation: true,
            same_everywhere: true,
        });
    }
    let differs = || {
        format!(
            "functions differ: ours {} pycute {}",
            ours["result"], theirs["result"]
        )
    };
    let same_everywhere = ours["size"] == theirs["size"] && ours["values"] == theirs["values"];
    if !same_everywhere {
        // Accepted only with fragmask's result meeting the operation's post-condition
        // (checked by pycute) and either pycute's breaking it, or CuTe leaving a
        // choice (right_inverse of a non-injective L).
        let ours_valid = theirs["ours_violations"]
            .as_array()
            .is_some_and(|v| v.is_empty());
        let pycute_wrong = theirs["root_violations"]
            .as_array()
            .is_some_and(|v| !v.is_empty());
        let choice = theirs["argument_injective"] == false;
        if !(ours_valid && (pycute_wrong || choice)) {
            return Err(differs());
        }
    }
    let same_notation = ours["shape"] == theirs["shape"]
        && unit_strides_zeroed(&ours["shape"], &ours["stride"])
            == unit_strides_zeroed(&theirs["shape"], &theirs["stride"]);
    if !same_notation && same_everywhere && !NOTATION_MAY_DIFFER.contains(&op) {
        return Err(format!(
            "same function, different notation: ours {} pycute {}",
            ours["result"], theirs["result"]
        ));
    }
    Ok(Agreement {
        same_notation,
        same_everywhere,
    })
}

/// left_inverse: fragmask's result equals CuTe C++'s (checked by `compare`); where it
/// is not pycute's own answer, the calculator's note must name pycute's exactly (same
/// function, same notation up to the strides of size-1 modes), and there must be no
/// note where the two agree. Returns whether they differ.
fn check_pycute_note(ours: &Value, theirs: &Value, stderr: &str) -> Result<bool, String> {
    let Some(pycute) = theirs["pycute_result"].as_str() else {
        return Ok(false);
    };
    let note = stderr
        .lines()
        .find_map(|line| {
            line.split_once("pycute and older CuTe give ")
                .map(|(_, rest)| rest)
        })
        .and_then(|rest| rest.split(", equal on the image").next());
    let differs = ours["values"] != theirs["pycute_values"] || ours["size"] != theirs["size"];
    match (differs, note) {
        (false, None) => Ok(false),
        (false, Some(named)) => Err(format!(
            "fragmask's note names {named} as pycute's answer, but pycute gives {pycute}, the same as fragmask's"
        )),
        (true, None) => Err(format!(
            "fragmask gives {} and pycute {pycute} (off L's image), but fragmask printed no note",
            ours["result"]
        )),
        (true, Some(named)) => {
            let Ours::Ok(named_json, _) = run_ours(named) else {
                return Err(format!("the note's layout {named} does not evaluate"));
            };
            let same = named_json["values"] == theirs["pycute_values"]
                && unit_strides_zeroed(&named_json["shape"], &named_json["stride"])
                    == unit_strides_zeroed(&tup_json(pycute, 0), &tup_json(pycute, 1));
            if same {
                Ok(true)
            } else {
                Err(format!("fragmask's note names {named} as pycute's answer, pycute gives {pycute}"))
            }
        }
    }
}

/// Side `side` (0: shape, 1: stride) of pycute's notation `S:D` as nested JSON arrays.
fn tup_json(notation: &str, side: usize) -> Value {
    let text = notation.replace(' ', "");
    let part = text.split(':').nth(side).unwrap_or_default();
    tup(part).json()
}

/// The stride tree with the stride of every size-1 leaf set to 0 (CuTe's algorithms
/// leave arbitrary strides there; no index reaches them).
fn unit_strides_zeroed(shape: &Value, stride: &Value) -> Value {
    match (shape, stride) {
        (Value::Array(shapes), Value::Array(strides)) => Value::Array(
            shapes
                .iter()
                .zip(strides)
                .map(|(s, d)| unit_strides_zeroed(s, d))
                .collect(),
        ),
        (s, _) if s == &json!(1) => json!(0),
        (_, d) => d.clone(),
    }
}
