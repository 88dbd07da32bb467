//! Evaluation of parsed expressions with `fragmask_layout`'s algebra.

use fragmask_layout::{
    blocked_product, coalesce, coalesce_modes, complement, composition, composition_by_mode,
    filter, left_inverse, logical_divide, logical_divide_by_mode, logical_product,
    logical_product_by_mode, raked_product, right_inverse, tiled_divide, tiled_divide_by_mode,
    zipped_divide, zipped_divide_by_mode, IntTuple, Layout, LayoutError,
};

use super::parse::Node;
use super::{CalcError, Value};

/// Every function the calculator knows, with its argument list, for messages and docs.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("coalesce", "(L) or (L, profile)"),
    ("filter", "(L)"),
    ("composition", "(A, B) or (A, <B0,B1,...>)"),
    ("complement", "(L) or (L, cotarget)"),
    ("right_inverse", "(L)"),
    ("left_inverse", "(L)"),
    ("logical_divide", "(A, B) or (A, <B0,B1,...>)"),
    ("zipped_divide", "(A, B) or (A, <B0,B1,...>)"),
    ("tiled_divide", "(A, B) or (A, <B0,B1,...>)"),
    ("logical_product", "(A, B) or (A, <B0,B1,...>)"),
    ("blocked_product", "(block, tiler)"),
    ("raked_product", "(block, tiler)"),
    ("size", "(L)"),
    ("cosize", "(L)"),
    ("rank", "(L)"),
    ("depth", "(L)"),
    ("eval", "(L, i) or (L, (coord)) or (L, c0, c1, ...)"),
    ("get", "(L, i, ...)"),
    ("mode", "(L, i, ...)"),
    ("flatten", "(L)"),
    ("make_layout", "(L0, L1, ...)"),
];

/// An intermediate value.
#[derive(Clone, Debug)]
enum Val {
    Int(i64),
    /// A shape literal without stride: a compact layout where a layout is expected, a
    /// by-mode tiler where a tiler is expected (CuTe's `Shape` tiler), a coordinate in
    /// `eval`.
    Shape(IntTuple),
    Layout(Layout),
    /// A by-mode tiler `<T0, T1, ...>`.
    Tiler(Vec<Layout>),
}

/// What the second argument of a divide, product or composition is.
// A `Layout` is a fixed-capacity value (no heap); short-lived, so not boxed.
#[allow(clippy::large_enum_variant)]
enum Tiler {
    Single(Layout),
    ByMode(Vec<Layout>),
}

/// Evaluates a parsed expression to its final value.
pub(crate) fn evaluate(node: &Node) -> Result<Value, CalcError> {
    match eval(node)? {
        Val::Int(value) => Ok(Value::Int(value)),
        Val::Layout(layout) => Ok(Value::Layout(layout)),
        Val::Shape(shape) => Ok(Value::Layout(compact(shape, node.pos())?)),
        Val::Tiler(_) => Err(CalcError::at(
            node.pos(),
            "a tiler <...> is only an argument of composition, the divides and logical_product; it has no value of its own",
        )),
    }
}

/// Notes on the parts of an expression where CuTe's implementations disagree and the
/// calculator had to pick one (shown by `fragmask layout` on standard error).
///
/// left_inverse: fragmask returns CuTe C++'s (`include/cute/layout.hpp` since CUTLASS
/// v3.9: the mixed radix of L's sorted strides). pycute (`python/pycute/layout.py`) and
/// CuTe C++ before v3.9 return `right_inverse(make_layout(L, complement(L)))`. Both
/// give `R(L(i)) == i`; off L's image they can differ, and then the note names pycute's.
pub(crate) fn notes(node: &Node) -> Vec<String> {
    let mut notes = Vec::new();
    collect_notes(node, &mut notes);
    notes
}

fn collect_notes(node: &Node, notes: &mut Vec<String>) {
    match node {
        Node::Tiler { items, .. } => items.iter().for_each(|item| collect_notes(item, notes)),
        Node::Call { name, args, .. } => {
            args.iter().for_each(|arg| collect_notes(arg, notes));
            if name != "left_inverse" || args.len() != 1 {
                return;
            }
            let Ok(layout) = eval(&args[0]).and_then(|v| as_layout(v, args[0].pos())) else {
                return;
            };
            let (Ok(ours), Some(pycute)) = (left_inverse(&layout), pycute_left_inverse(&layout))
            else {
                return;
            };
            if ours != pycute {
                notes.push(format!(
                    "left_inverse({layout}) = {ours} is CuTe C++'s (CUTLASS 3.9 and later); pycute and older CuTe give {pycute}, equal on the image of {layout} and different off it"
                ));
            }
        }
        _ => {}
    }
}

/// pycute's `left_inverse(L) = right_inverse(make_layout(L, complement(L)))` (its
/// complement's default cotarget is 1), where fragmask's algebra can compute it.
fn pycute_left_inverse(layout: &Layout) -> Option<Layout> {
    let rest = complement(layout, 1).ok()?;
    right_inverse(&Layout::from_modes(&[*layout, rest]).ok()?).ok()
}

fn eval(node: &Node) -> Result<Val, CalcError> {
    match node {
        Node::Int { value, .. } => Ok(Val::Int(*value)),
        Node::Shape { shape, .. } => Ok(Val::Shape(*shape)),
        Node::Layout { layout, .. } => Ok(Val::Layout(*layout)),
        Node::Tiler { items, .. } => {
            let mut modes = Vec::with_capacity(items.len());
            for item in items {
                let value = eval(item)?;
                if let Val::Shape(_) | Val::Tiler(_) = value {
                    return Err(CalcError::at(
                        item.pos(),
                        "nested tilers are not supported: give this mode's tiler as a layout, e.g. (2,2):(1,2)",
                    ));
                }
                modes.push(as_layout(value, item.pos())?);
            }
            Ok(Val::Tiler(modes))
        }
        Node::Call { name, args, pos } => call(name, args, *pos),
    }
}

fn call(name: &str, args: &[Node], pos: usize) -> Result<Val, CalcError> {
    let Some((_, signature)) = FUNCTIONS.iter().find(|(known, _)| *known == name) else {
        let known: Vec<&str> = FUNCTIONS.iter().map(|(known, _)| *known).collect();
        return Err(CalcError::at(
            pos,
            &format!("unknown function '{name}'; known: {}", known.join(", ")),
        ));
    };
    let (min, max) = arity(name);
    if args.len() < min || args.len() > max {
        let wanted = match (min, max) {
            (a, b) if a == b => format!("{a}"),
            (a, usize::MAX) => format!("at least {a}"),
            (a, b) => format!("{a} or {b}"),
        };
        return Err(CalcError::at(
            pos,
            &format!(
                "{name} takes {wanted} argument(s), got {}: {name}{signature}",
                args.len()
            ),
        ));
    }
    let values = args.iter().map(eval).collect::<Result<Vec<_>, _>>()?;
    let at = |i: usize| args[i].pos();
    let algebra = |error: LayoutError| algebra_error(name, pos, error);
    let layout_arg = |i: usize| as_layout(values[i].clone(), at(i));
    let tiler_arg = |i: usize| as_tiler(values[i].clone(), at(i));
    let result = match name {
        "coalesce" => {
            let layout = layout_arg(0)?;
            match values.get(1) {
                None => coalesce(&layout).map_err(algebra)?,
                Some(profile) => {
                    let profile = as_profile(profile, at(1))?;
                    coalesce_by_profile(&layout, &profile).map_err(algebra)?
                }
            }
        }
        "filter" => filter(&layout_arg(0)?).map_err(algebra)?,
        "composition" => {
            let a = layout_arg(0)?;
            match tiler_arg(1)? {
                Tiler::Single(b) => composition(&a, &b),
                Tiler::ByMode(tilers) => composition_by_mode(&a, &tilers),
            }
            .map_err(algebra)?
        }
        "complement" => {
            let layout = layout_arg(0)?;
            // CuTe C++: complement(layout) == complement(layout, cosize(layout)).
            // (pycute defaults to 1; the C++ default is the one a kernel author sees.)
            let cotarget = match values.get(1) {
                Some(value) => positive_int(value, at(1), "a cotarget")?,
                None => layout.cosize().map_err(algebra)?,
            };
            complement(&layout, cotarget).map_err(algebra)?
        }
        "right_inverse" => right_inverse(&layout_arg(0)?).map_err(algebra)?,
        "left_inverse" => left_inverse(&layout_arg(0)?).map_err(algebra)?,
        "logical_divide" | "zipped_divide" | "tiled_divide" | "logical_product" => {
            let a = layout_arg(0)?;
            let result = match (name, tiler_arg(1)?) {
                ("logical_divide", Tiler::Single(b)) => logical_divide(&a, &b),
                ("logical_divide", Tiler::ByMode(t)) => logical_divide_by_mode(&a, &t),
                ("zipped_divide", Tiler::Single(b)) => zipped_divide(&a, &b),
                ("zipped_divide", Tiler::ByMode(t)) => zipped_divide_by_mode(&a, &t),
                ("tiled_divide", Tiler::Single(b)) => tiled_divide(&a, &b),
                ("tiled_divide", Tiler::ByMode(t)) => tiled_divide_by_mode(&a, &t),
                (_, Tiler::Single(b)) => logical_product(&a, &b),
                (_, Tiler::ByMode(t)) => logical_product_by_mode(&a, &t),
            };
            result.map_err(algebra)?
        }
        "blocked_product" | "raked_product" => {
            let (block, tiler) = (layout_arg(0)?, layout_arg(1)?);
            let zipped = if name == "blocked_product" {
                blocked_product(&block, &tiler)
            } else {
                raked_product(&block, &tiler)
            }
            .map_err(algebra)?;
            // CuTe C++ ends both products with coalesce(zip(...), repeat<R>(_1{})):
            // each mode coalesced, the function unchanged.
            coalesce_modes(&zipped).map_err(algebra)?
        }
        "size" => return Ok(Val::Int(layout_arg(0)?.size().map_err(algebra)?)),
        "cosize" => return Ok(Val::Int(layout_arg(0)?.cosize().map_err(algebra)?)),
        "rank" => return Ok(Val::Int(layout_arg(0)?.rank() as i64)),
        "depth" => return Ok(Val::Int(layout_arg(0)?.depth() as i64)),
        "eval" => return eval_call(&layout_arg(0)?, &values[1..], &args[1..], pos).map(Val::Int),
        "get" | "mode" => {
            let mut layout = layout_arg(0)?;
            for (i, value) in values.iter().enumerate().skip(1) {
                let index = non_negative_int(value, at(i), "a mode index")?;
                let rank = layout.rank();
                layout = usize::try_from(index)
                    .ok()
                    .and_then(|index| layout.mode(index).ok())
                    .ok_or_else(|| {
                        CalcError::at(
                            at(i),
                            &format!("{name}: mode {index} is out of range for the rank-{rank} layout {layout}"),
                        )
                    })?;
            }
            layout
        }
        "flatten" => layout_arg(0)?.flatten(),
        "make_layout" => {
            let modes = (0..values.len())
                .map(layout_arg)
                .collect::<Result<Vec<_>, _>>()?;
            Layout::from_modes(&modes).map_err(algebra)?
        }
        _ => unreachable!("every name of FUNCTIONS has a case"),
    };
    Ok(Val::Layout(result))
}

fn arity(name: &str) -> (usize, usize) {
    match name {
        "coalesce" | "complement" => (1, 2),
        "filter" | "right_inverse" | "left_inverse" | "size" | "cosize" | "rank" | "depth"
        | "flatten" => (1, 1),
        "eval" | "get" | "mode" => (2, usize::MAX),
        "make_layout" => (2, usize::MAX),
        _ => (2, 2),
    }
}

/// `eval(L, i)`, `eval(L, (coord))` or `eval(L, c0, c1, ...)`.
fn eval_call(layout: &Layout, values: &[Val], args: &[Node], pos: usize) -> Result<i64, CalcError> {
    let coord = if values.len() == 1 {
        match &values[0] {
            Val::Int(index) => {
                if *index < 0 {
                    return Err(CalcError::at(
                        args[0].pos(),
                        "eval: the index must be non-negative",
                    ));
                }
                return layout
                    .eval(*index)
                    .map_err(|e| algebra_error("eval", pos, e));
            }
            Val::Shape(coord) => *coord,
            _ => {
                return Err(CalcError::expected(
                    args[0].pos(),
                    "an index or a coordinate such as (1,2)",
                ))
            }
        }
    } else {
        let mut modes = Vec::with_capacity(values.len());
        for (value, arg) in values.iter().zip(args) {
            match value {
                Val::Int(v) => modes.push(IntTuple::int(*v)),
                Val::Shape(t) => modes.push(*t),
                _ => {
                    return Err(CalcError::expected(
                        arg.pos(),
                        "a coordinate: an integer or a tuple",
                    ))
                }
            }
        }
        IntTuple::tuple(&modes).map_err(|e| algebra_error("eval", pos, e))?
    };
    if coord.leaves()[..coord.leaf_count()].iter().any(|&c| c < 0) {
        return Err(CalcError::at(
            args[0].pos(),
            "eval: coordinates must be non-negative",
        ));
    }
    layout.crd2idx(&coord).map_err(|error| match error {
        LayoutError::Incongruent => CalcError::at(
            args[0].pos(),
            &format!(
                "eval: the coordinate {coord} does not match the shape {} (give one entry per mode, or one index)",
                layout.shape()
            ),
        ),
        other => algebra_error("eval", pos, other),
    })
}

/// CuTe's `coalesce(layout, profile)`: an integer profile coalesces the whole layout;
/// a tuple profile coalesces mode by mode (recursively), keeping modes past it.
fn coalesce_by_profile(layout: &Layout, profile: &IntTuple) -> Result<Layout, LayoutError> {
    if profile.is_int() {
        return coalesce(layout);
    }
    if profile.rank() > layout.rank() {
        return Err(LayoutError::Incongruent);
    }
    let modes = (0..layout.rank())
        .map(|m| {
            let mode = layout.mode(m)?;
            if m < profile.rank() {
                coalesce_by_profile(&mode, &profile.mode(m)?)
            } else {
                Ok(mode)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Layout::from_modes(&modes)
}

fn compact(shape: IntTuple, pos: usize) -> Result<Layout, CalcError> {
    Layout::compact(shape).map_err(|e| CalcError::at(pos, &format!("bad shape: {e}")))
}

/// A layout where one is expected: an integer `n` is `n:1`, a shape its compact
/// column-major layout.
fn as_layout(value: Val, pos: usize) -> Result<Layout, CalcError> {
    match value {
        Val::Layout(layout) => Ok(layout),
        Val::Int(n) => Layout::leaf(n, 1)
            .map_err(|e| CalcError::at(pos, &format!("the integer {n} as the layout {n}:1: {e}"))),
        Val::Shape(shape) => compact(shape, pos),
        Val::Tiler(_) => Err(CalcError::expected(
            pos,
            "a layout here; a tiler <...> is only accepted as the second argument of composition, the divides and logical_product",
        )),
    }
}

/// The tiler argument: a layout, or by mode (`<...>`, or a bare shape as in CuTe).
fn as_tiler(value: Val, pos: usize) -> Result<Tiler, CalcError> {
    match value {
        Val::Tiler(modes) => Ok(Tiler::ByMode(modes)),
        Val::Shape(shape) => {
            // CuTe: a Shape tiler such as make_shape(4,8) divides mode by mode, <4:1,8:1>.
            let mut modes = Vec::with_capacity(shape.rank());
            for m in 0..shape.rank() {
                let mode = shape
                    .mode(m)
                    .map_err(|e| CalcError::at(pos, &e.to_string()))?;
                if !mode.is_int() {
                    return Err(CalcError::at(
                        pos,
                        "nested shape tilers are not supported: write <...> with a layout per mode",
                    ));
                }
                let n = mode.leaf(0).unwrap_or(0);
                modes.push(as_layout(Val::Int(n), pos)?);
            }
            Ok(Tiler::ByMode(modes))
        }
        other => Ok(Tiler::Single(as_layout(other, pos)?)),
    }
}

/// A coalesce profile: an integer or a shape literal.
fn as_profile(value: &Val, pos: usize) -> Result<IntTuple, CalcError> {
    match value {
        Val::Int(n) => Ok(IntTuple::int(*n)),
        Val::Shape(shape) => Ok(*shape),
        _ => Err(CalcError::expected(
            pos,
            "a profile: an integer or a tuple such as (1,1)",
        )),
    }
}

fn non_negative_int(value: &Val, pos: usize, what: &str) -> Result<i64, CalcError> {
    match value {
        Val::Int(n) if *n >= 0 => Ok(*n),
        _ => Err(CalcError::expected(
            pos,
            &format!("{what} (a non-negative integer)"),
        )),
    }
}

fn positive_int(value: &Val, pos: usize, what: &str) -> Result<i64, CalcError> {
    match value {
        Val::Int(n) if *n >= 1 => Ok(*n),
        _ => Err(CalcError::expected(
            pos,
            &format!("{what} (a positive integer)"),
        )),
    }
}

/// An algebra failure, named after the operation and placed at its call.
fn algebra_error(name: &str, pos: usize, error: LayoutError) -> CalcError {
    let hint = match (name, error) {
        ("composition", LayoutError::Divisibility) => {
            " (each of B's strides and the remaining shape must divide, or be divided by, A's coalesced mode sizes)"
        }
        ("logical_divide" | "zipped_divide" | "tiled_divide", LayoutError::Divisibility) => {
            " (A divided by B is A o (B, complement(B, size(A))); both steps must meet it)"
        }
        ("logical_product" | "blocked_product" | "raked_product", LayoutError::Divisibility) => {
            " (the product is (A, complement(A, size(A)*cosize(B)) o B); both steps must meet it)"
        }
        ("complement", LayoutError::Divisibility) => {
            " (sorted by stride, each stride must be a multiple of the extent shape*stride of the modes below it)"
        }
        ("composition" | "logical_divide" | "zipped_divide" | "tiled_divide" | "logical_product", LayoutError::Incongruent) => {
            " (a by-mode tiler may have at most as many modes as the layout)"
        }
        ("coalesce", LayoutError::Incongruent) => " (the profile has more modes than the layout)",
        ("left_inverse", LayoutError::Divisibility) => {
            " (sorted by stride, each stride must be a multiple of the one below it: CuTe's left inverse divisibility condition)"
        }
        ("left_inverse", LayoutError::NotInjective) => {
            " (two indices give the same offset: a mode of size above 1 has stride 0, or a mode reaches past the next larger stride)"
        }
        ("complement" | "logical_product" | "blocked_product" | "raked_product", LayoutError::NotInjective) => {
            " (sorted by stride, a mode starts inside the extent shape*stride of the modes below it, which CuTe's complement rejects as non-injective)"
        }
        _ => "",
    };
    CalcError::at(pos, &format!("{name}: {error}{hint}"))
}
