//! The layout calculator behind `fragmask layout EXPR`: parses a CuTe layout-algebra
//! expression, evaluates it with [`fragmask_layout`], and renders the result as CuTe
//! notation, a `print_layout`-style table or JSON.
//!
//! Expressions nest freely:
//!
//! - Layout literals in CuTe notation, `((4,8,4),(2,2,16)):((128,1,16),(64,8,512))`; a
//!   bare shape `(4,8)` is its compact column-major layout, an integer `n` is `n:1`.
//! - By-mode tilers `<L0,L1,...>` as the second argument of `composition`, the divides
//!   and `logical_product` (CuTe's `make_tile(L0, L1, ...)`). There, as in CuTe, a
//!   bare shape `(4,8)` is the tiler `<4:1,8:1>`, not a layout.
//! - Functions: see [`FUNCTIONS`].
//!
//! ```
//! use fragmask::calc::{evaluate, Value};
//! let value = evaluate("composition((6,2):(8,2),(4,3):(3,1))").unwrap();
//! assert_eq!(value.to_string(), "((2,2),3):((24,2),8)");
//! assert!(matches!(evaluate("size((4,8):(8,1))"), Ok(Value::Int(32))));
//! ```

use std::fmt;

use fragmask_layout::{IntTuple, Layout};
use serde_json::json;

mod eval;
mod parse;

pub use eval::FUNCTIONS;

/// Largest layout whose values `--json` lists and `--table` prints.
pub const MAX_LISTED_VALUES: i64 = 65536;

/// The result of an expression.
// `Layout` is a fixed-capacity `Copy` value (no heap); boxing it would only add an
// indirection to a value that lives for one command.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer (size, cosize, rank, depth, eval).
    Int(i64),
    /// A layout.
    Layout(Layout),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(value) => write!(f, "{value}"),
            Value::Layout(layout) => write!(f, "{layout}"),
        }
    }
}

/// Why an expression could not be evaluated, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalcError {
    /// Byte offset in the expression the message refers to.
    pub position: usize,
    /// What went wrong, or what was expected there.
    pub message: String,
}

impl CalcError {
    fn at(position: usize, message: &str) -> CalcError {
        CalcError {
            position,
            message: message.to_string(),
        }
    }

    fn expected(position: usize, what: &str) -> CalcError {
        CalcError {
            position,
            message: format!("expected {what}"),
        }
    }

    /// The message, then the expression with a caret under the position.
    ///
    /// ```
    /// let error = fragmask::calc::evaluate("size((4,8)").unwrap_err();
    /// assert_eq!(error.render("size((4,8)"), "column 11: expected ',' or ')'\n  size((4,8)\n            ^");
    /// ```
    pub fn render(&self, expr: &str) -> String {
        let position = self.position.min(expr.len());
        let prefix = expr.get(..position).unwrap_or(expr);
        let column = prefix.chars().count();
        let line: String = expr
            .chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c })
            .collect();
        format!(
            "column {}: {}\n  {}\n  {}^",
            column + 1,
            self.message,
            line,
            " ".repeat(column)
        )
    }
}

impl fmt::Display for CalcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.position)
    }
}

impl std::error::Error for CalcError {}

/// Parses and evaluates an expression.
pub fn evaluate(expr: &str) -> Result<Value, CalcError> {
    eval::evaluate(&parse::parse(expr)?)
}

/// Parses and evaluates an expression; also returns notes on the operations where
/// CuTe's implementations disagree and the result follows one of them (today:
/// left_inverse off L's image, CuTe C++ versus pycute; docs/calculator.md).
///
/// ```
/// let (value, notes) = fragmask::calc::evaluate_with_notes("left_inverse((1,2,4):(4,1,8))").unwrap();
/// assert_eq!(value.to_string(), "(8,4):(1,2)");
/// assert!(notes[0].contains("pycute and older CuTe give (2,4,4):(1,8,2)"));
/// ```
pub fn evaluate_with_notes(expr: &str) -> Result<(Value, Vec<String>), CalcError> {
    let node = parse::parse(expr)?;
    let value = eval::evaluate(&node)?;
    Ok((value, eval::notes(&node)))
}

/// The index grid of a rank-2 layout as CuTe's `print_layout` draws it: rows are mode
/// 0, columns mode 1, a header of column numbers. A rank-1 layout is one column.
/// (CuTe prints the layout above the grid; the caller prints it below.)
///
/// ```
/// let l = fragmask::layout::Layout::parse("(2,3):(3,1)").unwrap();
/// let table = fragmask::calc::table(&l).unwrap();
/// assert_eq!(table.lines().nth(2).unwrap(), " 0  | 0 | 1 | 2 |");
/// ```
pub fn table(layout: &Layout) -> Result<String, String> {
    let size = layout.size().map_err(|e| e.to_string())?;
    if size > MAX_LISTED_VALUES {
        return Err(format!(
            "--table: the layout has {size} entries, more than {MAX_LISTED_VALUES}"
        ));
    }
    let (rows, cols) = match layout.rank() {
        1 => (size, 1),
        2 => {
            let rows = layout.mode(0).and_then(|m| m.size()).map_err(|e| e.to_string())?;
            (rows, size / rows)
        }
        rank => {
            return Err(format!(
                "--table needs a rank-2 layout (rows = mode 0, columns = mode 1); {layout} has rank {rank}"
            ))
        }
    };
    let cosize = layout.cosize().map_err(|e| e.to_string())?;
    // cute::print_layout: idx_width = num_digits(cosize) + 2.
    let idx_width = cosize.to_string().len() + 2;
    let num_width = idx_width - 2;
    let rule = format!(
        "    {}+\n",
        format!("+{}", "-".repeat(idx_width)).repeat(cols as usize)
    );
    let mut out = String::from("    ");
    for col in 0..cols {
        out.push_str(&format!("  {col:>num_width$} "));
    }
    out.push('\n');
    for row in 0..rows {
        out.push_str(&rule);
        out.push_str(&format!("{row:>2}  "));
        for col in 0..cols {
            let value = layout.eval(row + rows * col).map_err(|e| e.to_string())?;
            out.push_str(&format!("| {value:>num_width$} "));
        }
        out.push_str("|\n");
    }
    out.push_str(&rule);
    Ok(out)
}

/// The JSON object `--json` prints: `expr`, `result` (notation), `kind` (`"layout"` or
/// `"int"`), and for layouts `shape`, `stride` (nested arrays), `size`, `cosize`,
/// `rank`, `depth` and `values` (`[L(0), L(1), ...]`, only up to
/// [`MAX_LISTED_VALUES`] entries); for integers `value`.
pub fn to_json(expr: &str, value: &Value) -> serde_json::Value {
    match value {
        Value::Int(n) => json!({
            "expr": expr,
            "result": n.to_string(),
            "kind": "int",
            "value": n,
        }),
        Value::Layout(layout) => {
            let size = layout.size().ok();
            let values = size.filter(|&s| s <= MAX_LISTED_VALUES).and_then(|s| {
                (0..s)
                    .map(|i| layout.eval(i).ok())
                    .collect::<Option<Vec<i64>>>()
            });
            let mut object = json!({
                "expr": expr,
                "result": layout.to_string(),
                "kind": "layout",
                "shape": tuple_json(&layout.shape()),
                "stride": tuple_json(&layout.stride()),
                "size": size,
                "cosize": layout.cosize().ok(),
                "rank": layout.rank(),
                "depth": layout.depth(),
            });
            if let Some(values) = values {
                object["values"] = json!(values);
            }
            object
        }
    }
}

/// A tuple as nested JSON arrays; a bare integer as a number.
fn tuple_json(tuple: &IntTuple) -> serde_json::Value {
    if tuple.is_int() {
        return json!(tuple.leaf(0));
    }
    serde_json::Value::Array(
        (0..tuple.rank())
            .map(|m| {
                tuple
                    .mode(m)
                    .map(|mode| tuple_json(&mode))
                    .unwrap_or(serde_json::Value::Null)
            })
            .collect(),
    )
}

#[cfg(test)]
#[path = "../../tests/support/proptest_ci.rs"]
mod proptest_ci;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A random layout in CuTe notation: 1-4 leaves, nested at most two deep.
    fn layout_text() -> impl Strategy<Value = String> {
        let leaf = (1i64..9, -64i64..65);
        prop::collection::vec(leaf, 1..5).prop_flat_map(|leaves| {
            let n = leaves.len();
            (Just(leaves), 0..n).prop_map(|(leaves, cut)| {
                let part = |range: &[(i64, i64)], pick: fn(&(i64, i64)) -> i64| {
                    let items: Vec<String> = range.iter().map(|l| pick(l).to_string()).collect();
                    if items.len() == 1 {
                        items[0].clone()
                    } else {
                        format!("({})", items.join(","))
                    }
                };
                let side = |pick: fn(&(i64, i64)) -> i64| {
                    if cut == 0 {
                        part(&leaves, pick)
                    } else {
                        format!(
                            "({},{})",
                            part(&leaves[..cut], pick),
                            part(&leaves[cut..], pick)
                        )
                    }
                };
                format!("{}:{}", side(|l| l.0), side(|l| l.1))
            })
        })
    }

    proptest! {
        #![proptest_config(super::proptest_ci::config(256))]

        #[test]
        fn layout_literals_print_back_unchanged(text in layout_text()) {
            let value = evaluate(&text).unwrap();
            prop_assert_eq!(value.to_string(), text.clone());
            prop_assert_eq!(value, Value::Layout(Layout::parse(&text).unwrap()));
        }

        #[test]
        fn eval_of_an_index_is_the_layout_at_that_index(text in layout_text(), index in 0i64..64) {
            let layout = Layout::parse(&text).unwrap();
            let index = index % layout.size().unwrap();
            let value = evaluate(&format!("eval({text}, {index})")).unwrap();
            prop_assert_eq!(value, Value::Int(layout.eval(index).unwrap()));
        }

        #[test]
        fn errors_point_inside_the_expression(text in "[a-z(),:<> 0-9]{0,24}") {
            if let Err(error) = evaluate(&text) {
                prop_assert!(error.position <= text.len());
                prop_assert!(error.render(&text).ends_with('^'));
            }
        }
    }
}
