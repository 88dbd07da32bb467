#!/usr/bin/env python3
"""Evaluates layout-calculator expressions with NVIDIA's pycute, for
tests/cute_crosscheck.rs.

pycute (NVIDIA/cutlass python/pycute, shipped in the PyPI package nvidia-cutlass; see
scripts/install-pycute.sh) is an implementation of CuTe's layout algebra independent of
fragmask's. This script translates an expression tree into pycute calls and prints what
pycute computes, plus the operation's post-conditions checked on pycute's own result.

stdin: one case, or a JSON array of cases. A case is
    {"tree": NODE, "ours": {"shape": S, "stride": D} | {"int": n} | null}
where NODE is one of
    {"int": n}                          an integer (n:1 where a layout is expected)
    {"shape": S}                        a bare shape: compact layout, or a by-mode
                                        tiler in a tiler position (as CuTe's Shape)
    {"layout": {"shape": S, "stride": D}}
    {"tiler": [NODE, ...]}              <L0,L1,...>
    {"op": name, "args": [NODE, ...]}
and S, D are integers or nested arrays. "ours" is fragmask's result; it is checked
against the post-condition of the root operation when pycute itself fails there.

stdout: for each case (an array for an array input)
    {"ok": true, "kind": "layout", "result": "(4,8):(1,4)", "shape": S, "stride": D,
     "size": n, "cosize": n, "values": [L(0), ...] (size <= 65536), "violations": [...],
     "pycute_result": "...", "pycute_values": [...] (left_inverse only: "result" is
     CuTe C++'s left_inverse, these are pycute's, which may differ off L's image),
     "root_violations": [...], "ours_violations": [...] (the root operation's
     post-condition on pycute's and on fragmask's result, where it is checkable),
     "argument_injective": bool (right_inverse only)}
    {"ok": true, "kind": "int", "value": n, "violations": [...]}
    {"ok": false, "error": "...", "failed_op": name, "at_root": bool,
     "ours_violations": [...] | null}
"violations" lists the post-conditions (CuTe's, e.g. composition's R(i) == A(B(i)))
that pycute's results break anywhere in the expression: pycute only asserts some of
CuTe's divisibility conditions, so where fragmask refuses an expression these show
that pycute's answer is not the operation's result.

Known pycute quirks avoided here: right_inverse stops at broadcast modes (see
right_inverse below); logical_product(A, int) calls logical_divide (ints
are turned into layouts first); complement's default cotarget is 1 where CuTe C++ uses
cosize(L) (the cotarget is always passed); blocked_product and raked_product are not in
pycute and are built from its logical_product as CuTe C++ defines them.
"""

import json
import sys

import pycute
from pycute import Layout

MAX_VALUES = 65536


class EvalError(Exception):
    def __init__(self, op, message):
        super().__init__(message)
        self.op = op


class Shape:
    """A bare shape literal."""

    def __init__(self, shape):
        self.shape = shape


class Tiler:
    """A by-mode tiler: a tuple of layouts."""

    def __init__(self, modes):
        self.modes = tuple(modes)


def to_tuple(value):
    if isinstance(value, list):
        return tuple(to_tuple(v) for v in value)
    return int(value)


def to_list(value):
    if isinstance(value, tuple):
        return [to_list(v) for v in value]
    return value


def notation(value):
    if isinstance(value, tuple):
        return "(" + ",".join(notation(v) for v in value) + ")"
    return str(value)


def unit_strides_zeroed(shape, stride):
    if isinstance(shape, tuple):
        return tuple(unit_strides_zeroed(s, d) for s, d in zip(shape, stride))
    return 0 if shape == 1 else stride


def as_layout(value):
    """A layout argument. The stride of a size-1 mode is set to 0: no index reaches it,
    so every operation's function is unchanged, but pycute asserts its stride
    divisibility check even on a size-1 mode of composition's B (which selects
    nothing), and fragmask does not."""
    if isinstance(value, int):
        value = Layout(value, 1)
    elif isinstance(value, Shape):
        value = Layout(value.shape)
    if not isinstance(value, Layout):
        raise EvalError(None, "expected a layout")
    return Layout(value.shape, unit_strides_zeroed(value.shape, value.stride))


def as_tiler(value):
    """pycute's tiler argument: a Layout, or a tuple of Layouts for by-mode."""
    if isinstance(value, Tiler):
        return value.modes
    if isinstance(value, Shape):
        if not isinstance(value.shape, tuple):
            return Layout(value.shape, 1)
        if any(isinstance(m, tuple) for m in value.shape):
            raise EvalError(None, "nested shape tiler")
        return tuple(Layout(m, 1) for m in value.shape)
    return as_layout(value)


def values_of(layout):
    return [layout(i) for i in range(pycute.size(layout))]


def modes_of(layout):
    return [layout[i] for i in range(len(layout))]


def pad(layout, rank):
    """CuTe's append<R>: pad with 1:0 modes up to rank R (a leaf becomes a 1-tuple)."""
    modes = modes_of(layout) if isinstance(layout.shape, tuple) else [layout]
    modes += [Layout(1, 0)] * (rank - len(modes))
    return pycute.make_layout(modes)


def right_inverse(layout):
    """CuTe C++'s right_inverse through pycute's. pycute sorts the modes by stride and
    stops at the first stride that is not the chain's next (1, then shape*stride of
    the mode taken), so a broadcast mode (stride 0, sorted first) or an overlapping
    mode ends it early: right_inverse((2,2):(0,1)) is 1:0 in pycute, 2:2 in CuTe C++.
    C++ coalesces first and looks each next stride up exactly (find_if), passing over
    such modes. Here the modes C++ passes over get a stride no chain reaches, keeping
    their place, so pycute's column-major index strides are unchanged."""
    flat = pycute.coalesce(layout)
    shapes, strides = pycute.flatten(flat.shape), pycute.flatten(flat.stride)
    on_chain, current = set(), 1
    while True:
        nxt = next((i for i, (s, d) in enumerate(zip(shapes, strides))
                    if abs(d) == current and i not in on_chain), None)
        if nxt is None:
            break
        on_chain.add(nxt)
        current = shapes[nxt] * abs(strides[nxt])
    unreachable = 2 * pycute.size(flat) * (1 + max(abs(d) for d in strides)) + 1
    patched = tuple(d if i in on_chain else unreachable for i, d in enumerate(strides))
    return pycute.right_inverse(Layout(shapes, patched))


def left_inverse_cpp(layout):
    """CuTe C++'s left_inverse since CUTLASS v3.9 (include/cute/layout.hpp), which
    pycute does not follow: coalesce L, then over its modes sorted by stride (stride-0
    modes skipped), shapes d_0, d_1/d_0, ..., and the last mode's shape, strides 0 and
    the column-major prefix products of those modes; each stride must be divisible by
    the size so far ("Left inverse divisibility condition")."""
    flat = pycute.coalesce(layout)
    shapes, strides = pycute.flatten(flat.shape), pycute.flatten(flat.stride)
    prefix = pycute.flatten(pycute.prefix_product(flat.shape))
    order = sorted(range(len(strides)), key=lambda i: strides[i])
    result_shape, result_stride = [], [0]
    for i in order:
        if strides[i] == 0:
            continue
        so_far = pycute.product(tuple(result_shape)) if result_shape else 1
        assert strides[i] % so_far == 0, "Left inverse divisibility condition"
        result_shape.append(strides[i] // so_far)
        result_stride.append(prefix[i])
    result_shape.append(shapes[order[-1]])
    return pycute.coalesce(Layout(tuple(result_shape), tuple(result_stride)))


def left_inverse_pycute(layout):
    """pycute's left_inverse (and CuTe C++'s before v3.9): right_inverse((L, complement(L)))."""
    return right_inverse(pycute.make_layout(layout, pycute.complement(layout, pycute.cosize(layout))))


def injective(layout):
    values = values_of(layout)
    return len(set(values)) == len(values)


def zip_product(block, tiler, tiler_first):
    """CuTe C++ blocked_product / raked_product on top of pycute's logical_product."""
    rank = max(len(block), len(tiler))
    product = pycute.logical_product(pad(block, rank), pad(tiler, rank))
    pairs = []
    for m in range(rank):
        first, second = product[0][m], product[1][m]
        if tiler_first:
            first, second = second, first
        pairs.append(pycute.make_layout(first, second))
    return pycute.coalesce(pycute.make_layout(pairs), (1,) * rank)


# ---- post-conditions (CuTe's), checked on concrete layouts ---------------------------


def check_composition(a, b, r, what="composition"):
    if pycute.size(r) != pycute.size(b):
        return [f"{what}: size(R) = {pycute.size(r)} != size(B) = {pycute.size(b)}"]
    for i in range(pycute.size(b)):
        if r(i) != a(b(i)):
            return [f"{what}: R({i}) = {r(i)} != A(B({i})) = {a(b(i))} for A = {a}, B = {b}"]
    return []


def check_complement(layout, cotarget, c):
    image = set(values_of(layout))
    cvals = values_of(c)
    for i in range(1, len(cvals)):
        if cvals[i - 1] >= cvals[i]:
            return [f"complement({layout}, {cotarget}) = {c} is not ordered at {i}"]
        if cvals[i] in image:
            return [f"complement({layout}, {cotarget}) = {c} hits L's offset {cvals[i]}"]
    # CuTe: @post size(result) >= cosize_hi / size(filter(layout))
    filtered = pycute.filter(layout)
    if pycute.size(c) < cotarget // pycute.size(filtered):
        return [f"complement({layout}, {cotarget}) = {c} is smaller than cotarget / size(filter(L))"]
    # The complement fills L's gaps: (filter(L), C) is a bijection onto [0, size). This
    # is what the complement is for (logical_divide's "rest", logical_product's
    # copies); it holds exactly when each sorted stride of L is a multiple of the
    # extent below it, the condition fragmask checks and pycute does not.
    completed = sorted(values_of(pycute.make_layout(filtered, c)))
    if completed != list(range(len(completed))):
        gap = next(i for i, v in enumerate(completed) if v != i)
        return [f"complement({layout}, {cotarget}) = {c} leaves a gap: (L, C) misses offset {gap}"]
    return []


def check_divide(a, b, r):
    """logical_divide(A, B) = A o (B, complement(B, size(A))), B a layout."""
    c = pycute.complement(b, pycute.size(a))
    return check_complement(b, pycute.size(a), c) + check_composition(
        a, pycute.make_layout(b, c), r, "logical_divide")


def check_product(a, b, r):
    """logical_product(A, B) = (A, complement(A, size(A)*cosize(B)) o B), B a layout."""
    cotarget = pycute.size(a) * pycute.cosize(b)
    c = pycute.complement(a, cotarget)
    return check_complement(a, cotarget, c) + check_composition(c, b, r[1], "logical_product")


def by_mode(check, a, tiler, r):
    if isinstance(tiler, tuple):
        found = []
        for m, t in enumerate(tiler):
            found += check(a[m], t, r[m])
        return found
    return check(a, tiler, r)


def post_conditions(op, args, r):
    """Post-conditions of one operation on its (pycute-evaluated) arguments."""
    if op == "composition":
        return by_mode(check_composition, args[0], args[1], r)
    if op == "complement":
        return check_complement(args[0], args[1], r)
    if op == "coalesce":
        a = args[0]
        if pycute.size(r) != pycute.size(a) or values_of(r) != values_of(a):
            return [f"coalesce({a}) = {r} changes the function"]
        return []
    if op == "right_inverse":
        a = args[0]
        for i in range(pycute.size(r)):
            if a(r(i)) != i:
                return [f"right_inverse({a}) = {r}: L(R({i})) = {a(r(i))} != {i}"]
        return []
    if op == "left_inverse":
        a = args[0]
        for i in range(pycute.size(a)):
            if r(a(i)) != i:
                return [f"left_inverse({a}) = {r}: R(L({i})) = {r(a(i))} != {i}"]
        return []
    if op == "logical_divide":
        return by_mode(check_divide, args[0], args[1], r)
    if op in ("zipped_divide", "tiled_divide"):
        return by_mode(check_divide, args[0], args[1], pycute.logical_divide(args[0], args[1]))
    if op == "logical_product":
        return by_mode(check_product, args[0], args[1], r)
    if op in ("blocked_product", "raked_product"):
        rank = max(len(args[0]), len(args[1]))
        block, tiler = pad(args[0], rank), pad(args[1], rank)
        return check_product(block, tiler, pycute.logical_product(block, tiler))
    return []


# ---- evaluation -----------------------------------------------------------------------


def apply(op, raw):
    """Evaluates one operation; returns (result, pycute args for the post-conditions)."""
    if op in ("coalesce",):
        a = as_layout(raw[0])
        if len(raw) == 1:
            return pycute.coalesce(a), [a]
        profile = raw[1].shape if isinstance(raw[1], Shape) else raw[1]
        return pycute.coalesce(a, profile), [a]
    if op == "filter":
        return pycute.filter(as_layout(raw[0])), None
    if op == "composition":
        a, b = as_layout(raw[0]), as_tiler(raw[1])
        return pycute.composition(a, b), [a, b]
    if op == "complement":
        a = as_layout(raw[0])
        cotarget = raw[1] if len(raw) > 1 else pycute.cosize(a)  # CuTe C++'s default
        return pycute.complement(a, cotarget), [a, cotarget]
    if op == "right_inverse":
        a = as_layout(raw[0])
        return right_inverse(a), [a]
    if op == "left_inverse":
        a = as_layout(raw[0])
        return left_inverse_cpp(a), [a]
    if op in ("logical_divide", "zipped_divide", "tiled_divide", "logical_product"):
        a, b = as_layout(raw[0]), as_tiler(raw[1])
        return getattr(pycute, op)(a, b), [a, b]
    if op in ("blocked_product", "raked_product"):
        a, b = as_layout(raw[0]), as_layout(raw[1])
        return zip_product(a, b, op == "raked_product"), [a, b]
    if op == "size":
        return pycute.size(as_layout(raw[0])), None
    if op == "cosize":
        return pycute.cosize(as_layout(raw[0])), None
    if op == "rank":
        return len(as_layout(raw[0])), None
    if op == "depth":
        def depth(t):
            return 1 + max(depth(x) for x in t) if isinstance(t, tuple) else 0
        return depth(as_layout(raw[0]).shape), None
    if op == "eval":
        a = as_layout(raw[0])
        coords = [c.shape if isinstance(c, Shape) else c for c in raw[1:]]
        return (a(coords[0]) if len(coords) == 1 else a(tuple(coords))), None
    if op in ("get", "mode"):
        a = as_layout(raw[0])
        for index in raw[1:]:
            if index >= len(a):
                raise EvalError(op, "mode out of range")
            a = a[index]
        return a, None
    if op == "flatten":
        a = as_layout(raw[0])
        return Layout(pycute.flatten(a.shape), pycute.flatten(a.stride)), None
    if op == "make_layout":
        return pycute.make_layout([as_layout(v) for v in raw]), None
    raise EvalError(op, f"unknown operation {op}")


def evaluate(node, violations):
    if "int" in node:
        return int(node["int"])
    if "shape" in node:
        return Shape(to_tuple(node["shape"]))
    if "layout" in node:
        return Layout(to_tuple(node["layout"]["shape"]), to_tuple(node["layout"]["stride"]))
    if "tiler" in node:
        return Tiler(as_layout(evaluate(item, violations)) for item in node["tiler"])
    op = node["op"]
    raw = [evaluate(arg, violations) for arg in node["args"]]
    try:
        result, checked = apply(op, raw)
    except EvalError as error:
        error.op = error.op or op
        raise
    except Exception as error:  # pycute asserts (AssertionError) or breaks otherwise
        raise EvalError(op, f"{type(error).__name__}: {error}") from error
    if isinstance(result, Layout) and any(s < 1 for s in pycute.flatten(result.shape)):
        # CuTe C++ static_asserts here ("Non-injective Layout detected in complement").
        violations.append(f"{op}: pycute built {result}, with a shape entry below 1")
    if checked is not None:
        try:
            violations += post_conditions(op, checked, result)
        except Exception as error:  # e.g. a result with a 0 in its shape
            violations.append(f"{op}: its result {result} cannot be evaluated: {type(error).__name__}")
    return result


def root_args(tree):
    """The root operation's pycute arguments, if pycute can evaluate them."""
    raw = [evaluate(arg, []) for arg in tree["args"]]
    op = tree["op"]
    if op in ("composition", "logical_divide", "zipped_divide", "tiled_divide", "logical_product"):
        return [as_layout(raw[0]), as_tiler(raw[1])]
    if op in ("blocked_product", "raked_product"):
        return [as_layout(raw[0]), as_layout(raw[1])]
    if op == "complement":
        a = as_layout(raw[0])
        return [a, raw[1] if len(raw) > 1 else pycute.cosize(a)]
    return [as_layout(raw[0])]


# Operations whose post-condition is checked on the result itself (the divides' and
# products' zipped forms are checked through logical_divide/logical_product instead).
CHECKED_AT_ROOT = ("composition", "complement", "coalesce", "right_inverse", "left_inverse",
                   "logical_divide", "logical_product")


def ours_layout(case):
    """fragmask's result for the case as a pycute Layout, if it is one."""
    ours = case.get("ours")
    if ours is None or "shape" not in ours:
        return None
    return Layout(to_tuple(ours["shape"]), to_tuple(ours["stride"]))


def run_case(case):
    tree = case["tree"]
    violations = []
    try:
        result = evaluate(tree, violations)
    except EvalError as error:
        at_root = "op" in tree and error.op == tree["op"]
        ours_violations = None
        ours = ours_layout(case)
        if at_root and ours is not None:
            try:
                if tree["op"] not in CHECKED_AT_ROOT:
                    ours_violations = None
                else:
                    ours_violations = post_conditions(tree["op"], root_args(tree), ours)
            except Exception as inner:  # noqa: BLE001 - report, do not crash the batch
                ours_violations = [f"could not check: {type(inner).__name__}: {inner}"]
        return {"ok": False, "error": str(error), "failed_op": error.op,
                "at_root": at_root, "ours_violations": ours_violations}
    if isinstance(result, (Shape, Tiler)):
        return {"ok": False, "error": "not a value", "failed_op": None,
                "at_root": True, "ours_violations": None}
    if isinstance(result, int):
        return {"ok": True, "kind": "int", "value": result, "violations": violations}
    try:
        return describe(tree, result, violations, ours_layout(case))
    except Exception as error:  # noqa: BLE001 - pycute built a layout it cannot evaluate
        return {"ok": False, "error": f"pycute's result {result} cannot be evaluated: "
                f"{type(error).__name__}: {error}", "failed_op": tree.get("op"),
                "at_root": True, "ours_violations": None}


def describe(tree, result, violations, ours):
    out = {"ok": True, "kind": "layout",
           "result": f"{notation(result.shape)}:{notation(result.stride)}",
           "shape": to_list(result.shape), "stride": to_list(result.stride),
           "size": pycute.size(result), "cosize": pycute.cosize(result),
           "violations": violations}
    if pycute.size(result) <= MAX_VALUES:
        out["values"] = values_of(result)
    op = tree.get("op")
    if op in CHECKED_AT_ROOT:
        args = root_args(tree)
        out["root_violations"] = post_conditions(op, args, result)
        if ours is not None:
            try:
                out["ours_violations"] = post_conditions(op, args, ours)
            except Exception as error:  # noqa: BLE001
                out["ours_violations"] = [f"could not check: {type(error).__name__}: {error}"]
        if op == "right_inverse":
            # CuTe picks one right inverse of a non-injective layout; others exist.
            out["argument_injective"] = injective(args[0])
    if tree.get("op") == "left_inverse":
        # "result" is CuTe C++'s; pycute's own answer may differ off L's image.
        try:
            theirs = left_inverse_pycute(root_args(tree)[0])
            out["pycute_result"] = f"{notation(theirs.shape)}:{notation(theirs.stride)}"
            if pycute.size(theirs) <= MAX_VALUES:
                out["pycute_values"] = values_of(theirs)
        except Exception:  # noqa: BLE001 - pycute fails where C++ does not
            out["pycute_result"] = None
    return out


def main():
    cases = json.load(sys.stdin)
    if isinstance(cases, list):
        json.dump([run_case(case) for case in cases], sys.stdout)
    else:
        json.dump(run_case(cases), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
