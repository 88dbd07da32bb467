//! Property tests of the layout algebra over random nested layouts. Each test is named
//! after the post-condition it proves (CuTe's post-conditions, `include/cute/layout.hpp`
//! and `media/docs/cpp/cute/02_layout_algebra.md`).

use std::cell::Cell;
use std::collections::HashSet;

use fragmask_layout::{
    blocked_product, coalesce, coalesce_modes, complement, composition, filter, left_inverse,
    logical_divide, logical_divide_by_mode, logical_product, logical_product_by_mode,
    raked_product, right_inverse, tiled_divide, tiled_divide_by_mode, zipped_divide,
    zipped_divide_by_mode, IdentityLayout, IntTuple, Layout, LayoutError, Swizzle, MAX_LEAVES,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

// ---------------------------------------------------------------------------------
// Generators.
// ---------------------------------------------------------------------------------

/// A nested tuple skeleton with values at the leaves.
#[derive(Clone, Debug)]
enum Tree {
    Leaf(i64),
    Node(Vec<Tree>),
}

impl Tree {
    fn to_tuple(&self) -> IntTuple {
        match self {
            Tree::Leaf(v) => IntTuple::int(*v),
            Tree::Node(children) => {
                let modes: Vec<IntTuple> = children.iter().map(Tree::to_tuple).collect();
                IntTuple::tuple(&modes).unwrap()
            }
        }
    }

    /// The same structure with the leaves taken from `values` in order.
    fn relabel(&self, values: &mut impl Iterator<Item = i64>) -> Tree {
        match self {
            Tree::Leaf(_) => Tree::Leaf(values.next().unwrap()),
            Tree::Node(children) => {
                Tree::Node(children.iter().map(|c| c.relabel(values)).collect())
            }
        }
    }
}

/// Groups `values` (in order) into a nested tuple of depth at most `depth_left` (a bare
/// integer when there is one value and the seeds say so). Deterministic in `seeds`.
fn group(values: &[i64], seeds: &mut impl Iterator<Item = u8>, depth_left: usize) -> Tree {
    let seed = seeds.next().unwrap() as usize;
    if values.len() == 1 && (depth_left == 0 || !seed.is_multiple_of(4)) {
        return Tree::Leaf(values[0]);
    }
    if depth_left == 1 {
        return Tree::Node(values.iter().map(|&v| Tree::Leaf(v)).collect());
    }
    // Split into 1..=4 consecutive parts; one part means a rank-1 tuple around a tuple.
    let parts = 1 + seed % values.len().min(4);
    let mut children = Vec::new();
    let mut start = 0;
    for part in 0..parts {
        let left_after = parts - part - 1;
        let room = values.len() - start - left_after;
        let take = if left_after == 0 {
            room
        } else {
            1 + seeds.next().unwrap() as usize % room
        };
        children.push(group(&values[start..start + take], seeds, depth_left - 1));
        start += take;
    }
    Tree::Node(children)
}

/// Halves the largest value until the product is at most `cap` (keeps domains small
/// enough to evaluate every index).
fn cap_product(values: &mut [i64], cap: i64) {
    while values.iter().product::<i64>() > cap {
        let largest = (0..values.len()).max_by_key(|&i| values[i]).unwrap();
        values[largest] = (values[largest] / 2).max(1);
    }
}

/// A shape skeleton: 1..=max_leaves leaves of 1..=8, nesting depth <= `depth`, size
/// at most `cap`.
fn arb_shape(max_leaves: usize, depth: usize, cap: i64) -> impl Strategy<Value = Tree> {
    (
        prop::collection::vec(1i64..=8, 1..=max_leaves),
        prop::collection::vec(any::<u8>(), 48),
    )
        .prop_map(move |(mut values, seeds)| {
            cap_product(&mut values, cap);
            group(&values, &mut seeds.into_iter().cycle(), depth)
        })
}

fn leaves_of(tree: &Tree) -> Vec<i64> {
    let mut out = Vec::new();
    fn walk(t: &Tree, out: &mut Vec<i64>) {
        match t {
            Tree::Leaf(v) => out.push(*v),
            Tree::Node(children) => children.iter().for_each(|c| walk(c, out)),
        }
    }
    walk(tree, &mut out);
    out
}

/// Strides for `shapes`: the leaves visited in the order given by `keys`, each stride
/// the extent so far times `gaps` (1: compact). Injective; every stride is a multiple
/// of the extent of the strides below it.
fn nested_strides(shapes: &[i64], keys: &[u32], gaps: &[i64]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    let mut strides = vec![0; shapes.len()];
    let mut extent = 1;
    for (rank, &leaf) in order.iter().enumerate() {
        strides[leaf] = extent * gaps[rank];
        extent = strides[leaf] * shapes[leaf];
    }
    strides
}

/// Strides for `shapes`: like [`nested_strides`] but each stride only a multiple of the
/// previous stride and at least the previous extent (injective, not always nested).
fn chained_strides(shapes: &[i64], keys: &[u32], gaps: &[i64]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..shapes.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    let mut strides = vec![0; shapes.len()];
    let mut previous = 1;
    let mut previous_shape = 1;
    for (rank, &leaf) in order.iter().enumerate() {
        strides[leaf] = previous * (previous_shape + gaps[rank] - 1);
        previous = strides[leaf];
        previous_shape = shapes[leaf];
    }
    strides
}

fn layout_of(shape: &Tree, strides: &[i64]) -> Layout {
    let stride = shape.relabel(&mut strides.iter().copied());
    Layout::new(shape.to_tuple(), stride.to_tuple()).unwrap()
}

/// Which strides a generated layout gets.
#[derive(Clone, Copy, Debug)]
enum Strides {
    /// Any of -8..=24, zeros included.
    Signed,
    /// Any of 0..=16.
    NonNegative,
    /// Compact in a random leaf order with gaps (see [`nested_strides`]).
    Nested,
    /// See [`chained_strides`].
    Chained,
    /// Compact in a random leaf order: a bijection onto `[0, size)`.
    Compact,
    /// Some leaves broadcast (stride 0), the others compact in a random order.
    Broadcast,
}

fn arb_layout_with(
    kind: Strides,
    max_leaves: usize,
    depth: usize,
    cap: i64,
) -> impl Strategy<Value = Layout> {
    (
        arb_shape(max_leaves, depth, cap),
        prop::collection::vec(-8i64..=24, 16),
        prop::collection::vec(any::<u32>(), 16),
        prop::collection::vec(1i64..=3, 16),
    )
        .prop_map(move |(shape, random, keys, gaps)| {
            let shapes = leaves_of(&shape);
            let strides: Vec<i64> = match kind {
                Strides::Signed => random,
                Strides::NonNegative => random.iter().map(|d| d.rem_euclid(17)).collect(),
                Strides::Nested => nested_strides(&shapes, &keys, &gaps),
                Strides::Chained => chained_strides(&shapes, &keys, &gaps),
                Strides::Compact => nested_strides(&shapes, &keys, &[1; 16]),
                Strides::Broadcast => {
                    let compact = nested_strides(&shapes, &keys, &[1; 16]);
                    let mut kept = 1;
                    let mut strides = vec![0; shapes.len()];
                    let mut order: Vec<usize> = (0..shapes.len()).collect();
                    order.sort_by_key(|&i| compact[i]);
                    for leaf in order {
                        if gaps[leaf] != 1 {
                            strides[leaf] = kept;
                            kept *= shapes[leaf];
                        }
                    }
                    strides
                }
            };
            layout_of(&shape, &strides[..shapes.len()])
        })
}

/// Any layout: depth <= 3, <= 8 leaves, size <= 4096, any stride kind.
fn arb_layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        arb_layout_with(Strides::Signed, 8, 3, 4096),
        arb_layout_with(Strides::NonNegative, 8, 3, 4096),
        arb_layout_with(Strides::Nested, 8, 3, 4096),
        arb_layout_with(Strides::Chained, 8, 3, 4096),
        arb_layout_with(Strides::Broadcast, 8, 3, 4096),
    ]
}

/// An injective layout (nested or chained strides).
fn arb_injective() -> impl Strategy<Value = Layout> {
    prop_oneof![
        arb_layout_with(Strides::Nested, 8, 3, 4096),
        arb_layout_with(Strides::Chained, 8, 3, 4096),
        arb_layout_with(Strides::Compact, 8, 3, 4096),
    ]
}

/// A layout `A` over the compact index space `space` (its leaves, in order) with
/// arbitrary strides, and a layout `B` whose leaves are factors of `space`'s leaves at
/// their compact positions, some dropped, permuted and regrouped, sometimes with a
/// broadcast mode and a mode running past `size(A)`: the shape of tiler that CuTe's
/// divisibility conditions accept.
#[derive(Clone, Debug)]
struct Aligned {
    a: Layout,
    b: Layout,
    /// `B` has no broadcast and no overrun mode: `(B, complement(B, size A))` is a
    /// bijection onto `[0, size A)`.
    b_exact: bool,
}

fn arb_aligned(b_depth: usize, allow_extras: bool, cap: i64) -> impl Strategy<Value = Aligned> {
    (
        prop::collection::vec(1i64..=8, 1..=6),
        prop::collection::vec(any::<u8>(), 64),
        prop::collection::vec(-8i64..=24, 16),
        0u8..4,
    )
        .prop_map(move |(mut space, seeds, a_strides, extras)| {
            cap_product(&mut space, cap);
            let mut seeds = seeds.into_iter().cycle();
            let a_shape = group(&space, &mut seeds, 3);
            let a = layout_of(&a_shape, &a_strides[..space.len()]);
            // Factor each leaf, place the factors at their compact strides.
            let mut factors = Vec::new();
            let mut position = 1i64;
            for &s in &space {
                let divisors: Vec<i64> = (1..=s).filter(|d| s % d == 0).collect();
                let first = divisors[seeds.next().unwrap() as usize % divisors.len()];
                for f in [first, s / first] {
                    if f > 1 {
                        factors.push((f, position));
                    }
                    position *= f;
                }
            }
            // Keep most, permute.
            let mut kept: Vec<(u8, (i64, i64))> = Vec::new();
            for f in factors {
                let (keep, key) = (seeds.next().unwrap(), seeds.next().unwrap());
                if keep % 5 != 0 {
                    kept.push((key, f));
                }
            }
            kept.sort_by_key(|(key, _)| *key);
            let mut modes: Vec<(i64, i64)> = kept.into_iter().map(|(_, f)| f).collect();
            let size_a = position;
            let b_exact = !(allow_extras && extras != 0);
            if !b_exact {
                if extras & 1 != 0 {
                    modes.push((2, 0)); // broadcast
                }
                if extras & 2 != 0 {
                    modes.push((2, size_a)); // runs past size(A): A's last mode extends
                }
            }
            if modes.is_empty() {
                modes.push((1, 1));
            }
            let shapes: Vec<i64> = modes.iter().map(|m| m.0).collect();
            let strides: Vec<i64> = modes.iter().map(|m| m.1).collect();
            let b_shape = group(&shapes, &mut seeds, b_depth);
            Aligned {
                a,
                b: layout_of(&b_shape, &strides),
                b_exact,
            }
        })
}

// ---------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------

fn size(layout: &Layout) -> i64 {
    layout.size().unwrap()
}

fn images(layout: &Layout) -> Vec<i64> {
    (0..size(layout)).map(|i| layout.eval(i).unwrap()).collect()
}

fn sorted(mut values: Vec<i64>) -> Vec<i64> {
    values.sort_unstable();
    values
}

fn is_injective(layout: &Layout) -> bool {
    let all = images(layout);
    all.iter().collect::<HashSet<_>>().len() == all.len()
}

/// CuTe's `compatible(B, R)` on shapes: every leaf of `b` matches a sub-tree of `r`
/// of the same size, and tuples have the same rank.
fn compatible(b: &IntTuple, r: &IntTuple) -> bool {
    if b.is_int() {
        return r.product() == b.product();
    }
    if r.is_int() || r.rank() != b.rank() {
        return false;
    }
    (0..b.rank()).all(|m| compatible(&b.mode(m).unwrap(), &r.mode(m).unwrap()))
}

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;
use proptest_ci::config;

/// Runs `test` over `strategy` and returns how many cases it reported as defined
/// (`Ok(true)`), out of how many.
fn run_counting<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<bool, TestCaseError>,
) -> (u32, u32) {
    let defined = Cell::new(0u32);
    let total = Cell::new(0u32);
    let mut runner = TestRunner::new(Config {
        source_file: Some(file!()),
        ..config(cases)
    });
    let result = runner.run(&strategy, |value| {
        let ok = test(value)?;
        total.set(total.get() + 1);
        defined.set(defined.get() + ok as u32);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    (defined.get(), total.get())
}

// ---------------------------------------------------------------------------------
// coalesce, coalesce_modes, filter.
// ---------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn coalesce_preserves_size_and_function(layout in arb_layout()) {
        let c = coalesce(&layout).unwrap();
        prop_assert_eq!(c.size(), layout.size());
        prop_assert!(c.depth() <= 1, "{}", c);
        prop_assert!(c.leaf_count() <= layout.leaf_count());
        prop_assert_eq!(images(&c), images(&layout), "{} -> {}", layout, c);
        // Nothing left to merge: no size-1 modes (unless the whole layout is 1:0) and
        // no adjacent pair with d1 == s0*d0.
        if c.leaf_count() > 1 || size(&c) > 1 {
            for i in 0..c.leaf_count() {
                let (s, d) = c.leaf_mode(i).unwrap();
                prop_assert!(s > 1, "{}", c);
                if i + 1 < c.leaf_count() {
                    prop_assert_ne!(c.leaf_mode(i + 1).unwrap().1, s * d, "{}", c);
                }
            }
        }
        prop_assert_eq!(coalesce(&c), Ok(c), "coalesce is idempotent");
    }

    #[test]
    fn coalesce_modes_keeps_rank_mode_sizes_and_function(layout in arb_layout()) {
        let c = coalesce_modes(&layout).unwrap();
        prop_assert_eq!(c.rank(), layout.rank());
        prop_assert_eq!(c.is_leaf(), layout.is_leaf());
        for m in 0..layout.rank() {
            let (before, after) = (layout.mode(m).unwrap(), c.mode(m).unwrap());
            prop_assert_eq!(after.size(), before.size());
            prop_assert!(after.depth() <= 1);
            prop_assert_eq!(images(&after), images(&before));
        }
        prop_assert_eq!(images(&c), images(&layout), "{} -> {}", layout, c);
    }

    #[test]
    fn filter_keeps_the_image_set_and_drops_broadcast_modes(layout in arb_layout()) {
        let f = filter(&layout).unwrap();
        let set: HashSet<i64> = images(&layout).into_iter().collect();
        let filtered = images(&f);
        prop_assert_eq!(filtered.iter().copied().collect::<HashSet<_>>(), set, "{} -> {}", layout, f);
        // Its size is the product of the non-broadcast leaves.
        let expected: i64 = (0..layout.leaf_count())
            .map(|i| layout.leaf_mode(i).unwrap())
            .filter(|&(_, d)| d != 0)
            .map(|(s, _)| s)
            .product();
        prop_assert_eq!(size(&f), expected);
        prop_assert!(f.depth() <= 1);
        for i in 0..f.leaf_count() {
            let (s, d) = f.leaf_mode(i).unwrap();
            prop_assert!(d != 0 || (s == 1 && f.leaf_count() == 1), "{}", f);
        }
        // An injective layout stays injective: filtering removes only repetition.
        if is_injective(&layout) {
            prop_assert_eq!(sorted(filtered), sorted(images(&layout)));
        }
    }
}

// ---------------------------------------------------------------------------------
// composition.
// ---------------------------------------------------------------------------------

/// `A(x)`. Beyond A's domain, CuTe's composition follows coalesce(A), whose last mode
/// extends (A's own trailing size-1 modes would absorb the index instead).
fn eval_a(a: &Layout, x: i64) -> Result<i64, LayoutError> {
    if x < size(a) {
        a.eval(x)
    } else {
        coalesce(a).unwrap().eval(x)
    }
}

fn check_composition(a: &Layout, b: &Layout) -> Result<bool, TestCaseError> {
    let r = match composition(a, b) {
        Ok(r) => r,
        Err(LayoutError::Divisibility | LayoutError::Capacity) => return Ok(false),
        Err(e) => return Err(TestCaseError::fail(format!("{a} o {b}: {e}"))),
    };
    prop_assert!(
        compatible(&b.shape(), &r.shape()),
        "{} o {} = {} not compatible",
        a,
        b,
        r
    );
    prop_assert_eq!(r.size(), b.size());
    if is_injective(&filter(b).unwrap()) {
        for i in 0..size(b) {
            prop_assert_eq!(
                r.eval(i),
                eval_a(a, b.eval(i).unwrap()),
                "{} o {} = {} at {}",
                a,
                b,
                r,
                i
            );
        }
    } else {
        // B's modes overlap: like CuTe, R is (A o B_0, A o B_1, ...), which is A o B
        // only where A adds up across B's modes. Along each leaf of B it is A o B.
        let mut prefix = 1;
        for k in 0..b.leaf_count() {
            let (s, d) = b.leaf_mode(k).unwrap();
            for c in 0..s {
                prop_assert_eq!(
                    r.eval(c * prefix),
                    eval_a(a, c * d),
                    "{} o {} = {} leaf {}",
                    a,
                    b,
                    r,
                    k
                );
            }
            prefix *= s;
        }
    }
    Ok(true)
}

#[test]
fn composition_evaluates_as_a_of_b_with_b_compatible_shape() {
    // Tilers aligned with A's modes: CuTe's divisibility conditions hold, so
    // composition must be defined.
    let (ok, total) = run_counting(256, arb_aligned(3, true, 1024), |case| {
        check_composition(&case.a, &case.b)
    });
    assert!(
        ok * 100 >= total * 95,
        "aligned compositions defined in only {ok} of {total}"
    );
    // Arbitrary pairs: whenever defined, it is right; a fair share is defined.
    let pairs = (
        arb_layout(),
        arb_layout_with(Strides::NonNegative, 4, 2, 64),
    );
    let (ok, total) = run_counting(256, pairs, |(a, b)| check_composition(&a, &b));
    assert!(
        ok * 5 >= total,
        "random compositions defined in only {ok} of {total}"
    );
}

#[test]
fn composition_rejects_negative_tiler_strides() {
    let (_, total) = run_counting(64, arb_layout(), |a| {
        let b = Layout::leaf(3, -2).unwrap();
        prop_assert_eq!(composition(&a, &b), Err(LayoutError::NegativeStride));
        Ok(true)
    });
    assert_eq!(total, 64);
}

// ---------------------------------------------------------------------------------
// complement.
// ---------------------------------------------------------------------------------

fn check_complement(layout: &Layout, cotarget: i64) -> Result<bool, TestCaseError> {
    let c = match complement(layout, cotarget) {
        Ok(c) => c,
        Err(
            LayoutError::Divisibility | LayoutError::NotInjective | LayoutError::NegativeStride,
        ) => return Ok(false),
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "complement({layout}, {cotarget}): {e}"
            )))
        }
    };
    let own: HashSet<i64> = images(layout).into_iter().collect();
    let rest = images(&c);
    for i in 1..rest.len() {
        prop_assert!(
            rest[i - 1] < rest[i],
            "complement({}, {}) = {} not ordered",
            layout,
            cotarget,
            c
        );
        prop_assert!(
            !own.contains(&rest[i]),
            "complement({}, {}) = {} meets L at {}",
            layout,
            cotarget,
            c,
            rest[i]
        );
    }
    let joined = Layout::from_modes(&[*layout, c]).unwrap();
    prop_assert!(
        joined.cosize().unwrap() >= cotarget,
        "cosize(({}, {})) < {}",
        layout,
        c,
        cotarget
    );
    // size(C) is only ceil-rounded: C stays below M plus the extent of L.
    let extent = (0..layout.leaf_count())
        .map(|i| layout.leaf_mode(i).unwrap())
        .filter(|&(s, d)| s > 1 && d > 0)
        .map(|(s, d)| s * d)
        .max()
        .unwrap_or(1);
    prop_assert!(
        c.cosize().unwrap() <= cotarget.max(1) + extent,
        "complement({}, {}) = {}",
        layout,
        cotarget,
        c
    );
    if is_injective(layout) {
        prop_assert!(is_injective(&joined), "({}, {}) not injective", layout, c);
    }
    Ok(true)
}

#[test]
fn complement_is_ordered_disjoint_and_covers_the_cotarget() {
    let nested = (arb_layout_with(Strides::Nested, 6, 3, 512), 1i64..=4096);
    let (ok, total) = run_counting(256, nested, |(l, m)| check_complement(&l, m));
    assert_eq!(
        ok, total,
        "complement of nested-stride layouts must be defined"
    );
    let any = (arb_layout_with(Strides::NonNegative, 6, 3, 512), 1i64..=512);
    let (ok, total) = run_counting(256, any, |(l, m)| check_complement(&l, m));
    assert!(
        ok * 10 >= total,
        "complement defined in only {ok} of {total}"
    );
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn complement_of_an_exact_tiler_completes_a_bijection(case in arb_aligned(3, false, 1024)) {
        let size_a = size(&case.a);
        let c = complement(&case.b, size_a).unwrap();
        let joined = Layout::from_modes(&[case.b, c]).unwrap();
        prop_assert_eq!(sorted(images(&joined)), (0..size_a).collect::<Vec<_>>(), "({}, {})", case.b, c);
    }
}

// ---------------------------------------------------------------------------------
// right_inverse, left_inverse.
// ---------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn right_inverse_gives_l_of_r_of_i_equal_i(layout in prop_oneof![
        arb_layout_with(Strides::NonNegative, 8, 3, 4096),
        arb_layout_with(Strides::Nested, 8, 3, 4096),
        arb_layout_with(Strides::Chained, 8, 3, 4096),
        arb_layout_with(Strides::Compact, 8, 3, 4096),
        arb_layout_with(Strides::Broadcast, 8, 3, 4096),
    ]) {
        let r = right_inverse(&layout).unwrap();
        prop_assert!(r.depth() <= 1);
        for i in 0..size(&r) {
            prop_assert_eq!(layout.eval(r.eval(i).unwrap()), Ok(i), "{} -> {} at {}", layout, r, i);
        }
    }

    #[test]
    fn right_inverse_of_a_bijection_has_full_size(layout in arb_layout_with(Strides::Compact, 8, 3, 4096)) {
        let r = right_inverse(&layout).unwrap();
        prop_assert_eq!(r.size(), layout.size(), "{} -> {}", layout, r);
    }

    #[test]
    fn right_inverse_skips_broadcast_modes(layout in arb_layout_with(Strides::Broadcast, 8, 3, 4096)) {
        // The non-broadcast leaves are a bijection onto [0, their size): R covers it.
        let r = right_inverse(&layout).unwrap();
        prop_assert_eq!(r.size(), filter(&layout).unwrap().size(), "{} -> {}", layout, r);
        for i in 0..size(&r) {
            prop_assert_eq!(layout.eval(r.eval(i).unwrap()), Ok(i));
        }
    }

    #[test]
    fn left_inverse_gives_r_of_l_of_i_equal_i(layout in arb_injective()) {
        let inverse = left_inverse(&layout).unwrap();
        for i in 0..size(&layout) {
            prop_assert_eq!(inverse.eval(layout.eval(i).unwrap()), Ok(i), "{} -> {} at {}", layout, inverse, i);
        }
    }

    #[test]
    fn left_inverse_refuses_non_injective_layouts_and_names_the_reason(layout in arb_layout_with(Strides::NonNegative, 8, 3, 4096)) {
        match left_inverse(&layout) {
            Ok(inverse) => {
                for i in 0..size(&layout) {
                    prop_assert_eq!(inverse.eval(layout.eval(i).unwrap()), Ok(i), "{} -> {}", layout, inverse);
                }
            }
            // "not injective" only for a layout that is not.
            Err(LayoutError::NotInjective) => prop_assert!(!is_injective(&layout), "{}", layout),
            Err(LayoutError::Divisibility) => {}
            Err(e) => prop_assert!(false, "left_inverse({}): {}", layout, e),
        }
        if !is_injective(&layout) {
            prop_assert!(left_inverse(&layout).is_err());
        }
    }
}

// ---------------------------------------------------------------------------------
// Divides.
// ---------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn logical_divide_is_a_composed_with_b_and_its_complement(case in arb_aligned(2, true, 1024)) {
        let (a, b) = (case.a, case.b);
        let divided = logical_divide(&a, &b).unwrap();
        let rest = complement(&b, size(&a)).unwrap();
        let reference = composition(&a, &Layout::from_modes(&[b, rest]).unwrap()).unwrap();
        prop_assert_eq!(divided.rank(), 2);
        prop_assert_eq!(divided.size(), reference.size());
        prop_assert_eq!(images(&divided), images(&reference));
        // Mode 0 evaluates as A o B.
        let tile = divided.mode(0).unwrap();
        prop_assert_eq!(tile.size(), b.size());
        for i in 0..size(&b) {
            prop_assert_eq!(tile.eval(i), eval_a(&a, b.eval(i).unwrap()), "{} / {} = {}", a, b, divided);
        }
        // Mode 1 is A composed with the complement.
        let tiles = divided.mode(1).unwrap();
        for j in 0..size(&rest) {
            prop_assert_eq!(tiles.eval(j), eval_a(&a, rest.eval(j).unwrap()));
        }
        // An exact tiler only permutes A.
        if case.b_exact {
            prop_assert_eq!(sorted(images(&divided)), sorted(images(&a)), "{} / {} = {}", a, b, divided);
        }
    }

    #[test]
    fn zipped_and_tiled_divide_by_one_tiler_are_logical_divide(case in arb_aligned(2, true, 1024)) {
        let logical = logical_divide(&case.a, &case.b).unwrap();
        prop_assert_eq!(zipped_divide(&case.a, &case.b), Ok(logical));
        let tiled = tiled_divide(&case.a, &case.b).unwrap();
        // (tile, rest0, rest1, ...): the rest modes unpacked, same leaves in order.
        prop_assert_eq!(tiled.mode(0), logical.mode(0));
        let rest = logical.mode(1).unwrap();
        prop_assert_eq!(tiled.rank(), 1 + rest.rank());
        prop_assert_eq!(tiled.flatten(), logical.flatten());
        prop_assert_eq!(images(&tiled), images(&logical));
    }
}

/// A rank-`rank` layout whose modes are aligned cases' A, with the matching tilers.
fn arb_by_mode() -> impl Strategy<Value = (Layout, Vec<Layout>)> {
    (
        prop::collection::vec(arb_aligned(1, false, 64), 2..=3),
        1usize..=3,
    )
        .prop_filter_map("too many leaves", |(cases, tilers)| {
            let modes: Vec<Layout> = cases.iter().map(|c| coalesce(&c.a).unwrap()).collect();
            let a = Layout::from_modes(&modes).ok()?;
            if size(&a) > 4096 {
                return None;
            }
            let tilers: Vec<Layout> = cases
                .iter()
                .take(tilers.min(cases.len()))
                .map(|c| c.b)
                .collect();
            Some((a, tilers))
        })
}

/// `t` as a tuple of the given modes (a rank-1 tuple for one mode).
fn tuple_of(modes: &[IntTuple]) -> IntTuple {
    IntTuple::tuple(modes).unwrap()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn zipped_and_tiled_divide_by_mode_permute_logical_divide((a, tilers) in arb_by_mode()) {
        let logical = match logical_divide_by_mode(&a, &tilers) {
            Ok(l) => l,
            Err(LayoutError::Capacity) => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("{a} / {tilers:?}: {e}"))),
        };
        let zipped = zipped_divide_by_mode(&a, &tilers).unwrap();
        let tiled = tiled_divide_by_mode(&a, &tilers).unwrap();
        prop_assert_eq!(zipped.size(), logical.size());
        prop_assert_eq!(tiled.size(), logical.size());
        prop_assert_eq!(sorted(images(&zipped)), sorted(images(&logical)));
        let (n, rank) = (tilers.len(), a.rank());
        prop_assert_eq!(tiled.rank(), 1 + rank);
        // Pointwise under the index permutation: for tile index t_m and rest index r_m
        // of each tiled mode m (and index x_k of each untiled mode k),
        //   logical((t_0,r_0), ..., x_k) == zipped((t_0,...), (r_0,..., x_k))
        //                                == tiled((t_0,...), r_0, ..., x_k).
        let extent = |m: usize| -> (i64, i64) {
            let mode = logical.mode(m).unwrap();
            if m < n {
                (size(&mode.mode(0).unwrap()), size(&mode.mode(1).unwrap()))
            } else {
                (size(&mode), 1)
            }
        };
        let extents: Vec<(i64, i64)> = (0..rank).map(extent).collect();
        let total: i64 = extents.iter().map(|(t, r)| t * r).product();
        for flat in 0..total {
            let mut rest_index = flat;
            let mut digits = Vec::new();
            for &(t, r) in &extents {
                digits.push((rest_index % t, (rest_index / t) % r));
                rest_index /= t * r;
            }
            let int = IntTuple::int;
            let logical_crd = tuple_of(&(0..rank).map(|m| {
                if m < n { IntTuple::flat(&[digits[m].0, digits[m].1]).unwrap() } else { int(digits[m].0) }
            }).collect::<Vec<_>>());
            let tiles = tuple_of(&(0..n).map(|m| int(digits[m].0)).collect::<Vec<_>>());
            let rests: Vec<IntTuple> = (0..rank).map(|m| int(if m < n { digits[m].1 } else { digits[m].0 })).collect();
            let zipped_crd = tuple_of(&[tiles, tuple_of(&rests)]);
            let mut tiled_modes = vec![tiles];
            tiled_modes.extend(rests);
            let tiled_crd = tuple_of(&tiled_modes);
            let expected = logical.crd2idx(&logical_crd).unwrap();
            prop_assert_eq!(zipped.crd2idx(&zipped_crd), Ok(expected), "{} vs {}", zipped, logical);
            prop_assert_eq!(tiled.crd2idx(&tiled_crd), Ok(expected), "{} vs {}", tiled, logical);
        }
        // Mode 0 of the zipped divide is the by-mode composition.
        let tile = zipped.mode(0).unwrap();
        for (m, tiler) in tilers.iter().enumerate() {
            let composed = composition(&a.mode(m).unwrap(), tiler).unwrap();
            prop_assert_eq!(images(&tile.mode(m).unwrap()), images(&composed));
        }
    }
}

// ---------------------------------------------------------------------------------
// Products.
// ---------------------------------------------------------------------------------

/// `composition(rest, tiler)` as CuTe defines it for any tiler: by mode. Each leaf
/// `(s_k, d_k)` of the tiler composes on its own, and the results add up across the
/// leaves: at tiler coordinate `(c_0, c_1, ...)` the value is `sum_k rest(c_k * d_k)`.
/// This is `rest(tiler(j))` only when rest is linear across the tiler's modes, e.g.
/// when the tiler is injective (up to broadcast modes); for an overlapping tiler such
/// as `(3,3):(2,1)` it is not (class 9 of issue 10).
fn by_mode_composition_at(rest: &Layout, tiler: &Layout, j: i64) -> Result<i64, LayoutError> {
    let mut index = j;
    let mut total = 0;
    for k in 0..tiler.leaf_count() {
        let (s, d) = tiler.leaf_mode(k).unwrap();
        total += eval_a(rest, (index % s) * d)?;
        index /= s;
    }
    Ok(total)
}

/// `logical_product(A, B) = (A, composition(complement(A, size(A)*cosize(B)), B))`
/// (CuTe, `include/cute/layout.hpp`), checked by mode for every tiler, and as the
/// functional composition `rest(B(j))` where that is what CuTe's composition computes:
/// for tilers injective up to broadcast modes. Returns whether the product was defined
/// and whether the functional statement was checked.
fn check_logical_product(block: &Layout, tiler: &Layout) -> Result<(bool, bool), TestCaseError> {
    let product = match logical_product(block, tiler) {
        Ok(p) => p,
        Err(LayoutError::Divisibility | LayoutError::Capacity) => return Ok((false, false)),
        Err(e) => return Err(TestCaseError::fail(format!("{block} x {tiler}: {e}"))),
    };
    prop_assert_eq!(product.rank(), 2);
    prop_assert_eq!(product.mode(0), Ok(*block));
    prop_assert_eq!(size(&product), size(block) * size(tiler));
    prop_assert!(compatible(
        &tiler.shape(),
        &product.mode(1).unwrap().shape()
    ));
    let rest = complement(block, size(block) * tiler.cosize().unwrap()).unwrap();
    let copies = product.mode(1).unwrap();
    // By mode, for every tiler.
    for j in 0..size(tiler) {
        prop_assert_eq!(
            copies.eval(j),
            by_mode_composition_at(&rest, tiler, j),
            "{} x {} = {} at {}",
            block,
            tiler,
            product,
            j
        );
    }
    let functional = is_injective(&filter(tiler).unwrap());
    if functional {
        // Mode 1 is the function rest o B, and copies of an injective block placed by
        // an injective tiler do not overlap.
        for j in 0..size(tiler) {
            prop_assert_eq!(
                copies.eval(j),
                eval_a(&rest, tiler.eval(j).unwrap()),
                "{} x {} = {} at {}",
                block,
                tiler,
                product,
                j
            );
        }
        if is_injective(tiler) {
            prop_assert!(
                is_injective(&product),
                "{} x {} = {}",
                block,
                tiler,
                product
            );
        }
    }
    Ok((true, functional))
}

/// Blocks for products: injective with nested strides (complement is defined).
fn arb_block() -> impl Strategy<Value = Layout> {
    prop_oneof![
        arb_layout_with(Strides::Compact, 4, 2, 64),
        arb_layout_with(Strides::Nested, 4, 2, 64)
    ]
}

/// Tilers whose leaves overlap (not injective): each leaf's stride below the extent
/// of the leaves under it, e.g. `(3,3):(2,1)`.
fn arb_overlapping_tiler() -> impl Strategy<Value = Layout> {
    (arb_shape(4, 2, 64), prop::collection::vec(1i64..=4, 16)).prop_filter_map(
        "a single leaf cannot overlap",
        |(shape, strides)| {
            let shapes = leaves_of(&shape);
            let tiler = layout_of(&shape, &strides[..shapes.len()]);
            (!is_injective(&tiler)).then_some(tiler)
        },
    )
}

#[test]
fn logical_product_of_an_injective_tiler_is_a_times_rest_of_b() {
    // Tilers injective up to broadcast modes: mode 1 is the function rest o B.
    let tiler = prop_oneof![
        arb_layout_with(Strides::Nested, 4, 2, 64),
        arb_layout_with(Strides::Chained, 4, 2, 64),
        arb_layout_with(Strides::Compact, 4, 2, 64),
        arb_layout_with(Strides::Broadcast, 4, 2, 64),
    ];
    let (ok, total) = run_counting(256, (arb_block(), tiler), |(a, b)| {
        let (defined, functional) = check_logical_product(&a, &b)?;
        prop_assert!(!defined || functional, "{} is not injective", b);
        Ok(defined)
    });
    assert!(
        ok * 3 >= total,
        "logical_product defined in only {ok} of {total}"
    );
}

#[test]
fn logical_product_keeps_a_as_mode_0_and_composes_rest_with_b_by_mode() {
    // Any tiler, overlapping ones included: the by-mode statement.
    let tiler = prop_oneof![
        arb_layout_with(Strides::Nested, 4, 2, 64),
        arb_layout_with(Strides::NonNegative, 4, 2, 64),
        arb_overlapping_tiler(),
    ];
    let (ok, total) = run_counting(256, (arb_block(), tiler), |(a, b)| {
        Ok(check_logical_product(&a, &b)?.0)
    });
    assert!(
        ok * 3 >= total,
        "logical_product defined in only {ok} of {total}"
    );
}

#[test]
fn logical_product_of_an_overlapping_tiler_is_not_rest_of_b() {
    // The minimal input of issue 10, class 9 (a flake of the former functional
    // property): the tiler (3,3):(2,1) is not injective, and CuTe's (and pycute's)
    // product differs from the function rest o B at j = 8, where B(8) = 6.
    let block = Layout::parse("(1,1,2,1):(2,2,6,2)").unwrap();
    let tiler = Layout::parse("(3,3):(2,1)").unwrap();
    let product = logical_product(&block, &tiler).unwrap();
    assert_eq!(
        product,
        Layout::parse("((1,1,2,1),(3,3)):((2,2,6,2),(2,1))").unwrap()
    );
    assert_eq!(
        check_logical_product(&block, &tiler).unwrap(),
        (true, false)
    );
    let rest = complement(&block, 2 * 7).unwrap();
    let copies = product.mode(1).unwrap();
    assert_eq!(tiler.eval(8), Ok(6));
    assert_eq!(copies.eval(8), Ok(6));
    assert_eq!(eval_a(&rest, 6), Ok(12));
}

fn check_blocked_and_raked(block: &Layout, tiler: &Layout) -> Result<bool, TestCaseError> {
    let blocked = match blocked_product(block, tiler) {
        Ok(p) => p,
        Err(LayoutError::Divisibility | LayoutError::Capacity) => return Ok(false),
        Err(e) => return Err(TestCaseError::fail(format!("{block} [x] {tiler}: {e}"))),
    };
    let raked = raked_product(block, tiler).unwrap();
    let rank = block.rank().max(tiler.rank());
    for p in [&blocked, &raked] {
        prop_assert_eq!(p.rank(), rank);
        prop_assert_eq!(size(p), size(block) * size(tiler));
    }
    // raked = blocked with the two sub-modes of every mode swapped.
    for m in 0..rank {
        let (b, r) = (blocked.mode(m).unwrap(), raked.mode(m).unwrap());
        prop_assert_eq!(b.rank(), 2);
        prop_assert_eq!(b.mode(0), r.mode(1));
        prop_assert_eq!(b.mode(1), r.mode(0));
    }
    prop_assert_eq!(sorted(images(&blocked)), sorted(images(&raked)));
    // blocked: mode m starts with the block's mode m (padded with 1:0).
    for m in 0..rank {
        let inner = blocked.mode(m).unwrap().mode(0).unwrap();
        let expected = if m < block.rank() {
            block.mode(m).unwrap()
        } else {
            Layout::leaf(1, 0).unwrap()
        };
        prop_assert_eq!(inner, expected);
    }
    // The blocked product is the logical product with modes regrouped: same offsets.
    let logical = logical_product(
        &block.append_to_rank(rank).unwrap(),
        &tiler.append_to_rank(rank).unwrap(),
    )
    .unwrap();
    prop_assert_eq!(sorted(images(&blocked)), sorted(images(&logical)));
    Ok(true)
}

#[test]
fn blocked_and_raked_products_multiply_sizes_and_swap_sub_modes() {
    let block = arb_block();
    let tiler = prop_oneof![
        arb_layout_with(Strides::Nested, 4, 2, 64),
        arb_layout_with(Strides::NonNegative, 4, 2, 64),
    ];
    let (ok, total) = run_counting(192, (block, tiler), |(a, b)| {
        check_blocked_and_raked(&a, &b)
    });
    assert!(
        ok * 3 >= total,
        "blocked_product defined in only {ok} of {total}"
    );
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn logical_product_by_mode_keeps_each_block_mode(
        modes in prop::collection::vec(arb_layout_with(Strides::Nested, 3, 1, 16), 2..=3),
        tilers in prop::collection::vec(arb_layout_with(Strides::Compact, 3, 1, 16), 1..=3),
    ) {
        let a = Layout::from_modes(&modes).unwrap();
        let tilers = &tilers[..tilers.len().min(modes.len())];
        match logical_product_by_mode(&a, tilers) {
            Ok(p) => {
                prop_assert_eq!(p.rank(), a.rank());
                for m in 0..a.rank() {
                    let mode = p.mode(m).unwrap();
                    if let Some(tiler) = tilers.get(m) {
                        prop_assert_eq!(mode.mode(0), a.mode(m));
                        prop_assert_eq!(size(&mode), size(&a.mode(m).unwrap()) * size(tiler));
                    } else {
                        prop_assert_eq!(Ok(mode), a.mode(m));
                    }
                }
            }
            Err(LayoutError::Divisibility | LayoutError::Capacity | LayoutError::NotInjective) => {}
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

// ---------------------------------------------------------------------------------
// Coordinates, identity layouts, notation, swizzles.
// ---------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn crd2idx_of_idx2crd_is_evaluation(layout in arb_layout()) {
        let compact = Layout::compact(layout.shape()).unwrap();
        let leaves = layout.shape().leaves();
        for i in 0..size(&layout) {
            let crd = layout.idx2crd(i);
            prop_assert!(crd.congruent(&layout.shape()));
            for (k, &extent) in leaves.iter().enumerate().take(crd.leaf_count()) {
                let c = crd.leaf(k).unwrap();
                prop_assert!(0 <= c && c < extent, "{} at {}", crd, i);
            }
            prop_assert_eq!(layout.crd2idx(&crd), layout.eval(i));
            prop_assert_eq!(compact.crd2idx(&crd), Ok(i));
            prop_assert_eq!(layout.crd2idx(&IntTuple::int(i)), layout.eval(i));
        }
        let identity = IdentityLayout::new(layout.shape()).unwrap();
        prop_assert_eq!(identity.eval(size(&layout) - 1), Ok(layout.idx2crd(size(&layout) - 1)));
        prop_assert!(identity.eval(size(&layout)).is_err());
    }

    #[test]
    fn parse_of_display_is_the_layout(layout in arb_layout()) {
        let text = layout.to_string();
        prop_assert_eq!(Layout::parse(&text), Ok(layout), "{}", text);
        prop_assert_eq!(IntTuple::parse(&layout.shape().to_string()), Ok(layout.shape()));
        // Whitespace between tokens is allowed.
        let spaced = text.replace(',', " , ").replace(':', " : ");
        prop_assert_eq!(Layout::parse(&spaced), Ok(layout), "{}", spaced);
    }

    #[test]
    fn swizzle_is_a_bijection_on_its_period_and_an_involution(
        bits in 0u32..=3, base in 0u32..=4, extra in 0u32..=2, negative in any::<bool>(),
        samples in prop::collection::vec(any::<i64>(), 16),
    ) {
        let magnitude = (bits + extra) as i32;
        let shift = if negative { -magnitude } else { magnitude };
        let swizzle = Swizzle::new(bits, base, shift).unwrap();
        let period = swizzle.period();
        prop_assert!(period <= 1 << 12);
        let mut seen = vec![false; period as usize];
        for x in 0..period {
            let y = swizzle.apply(x);
            prop_assert!((0..period).contains(&y), "{} maps {} to {}", swizzle, x, y);
            prop_assert!(!seen[y as usize], "{} not injective at {}", swizzle, x);
            seen[y as usize] = true;
            prop_assert_eq!(swizzle.apply(y), x);
        }
        for x in samples {
            prop_assert_eq!(swizzle.apply(swizzle.apply(x)), x);
            // Only bits below the period change.
            prop_assert_eq!(swizzle.apply(x) & !(period - 1), x & !(period - 1));
        }
        prop_assert_eq!(swizzle.source_mask() & swizzle.target_mask(), 0);
    }
}

// ---------------------------------------------------------------------------------
// Huge values: every operation returns Ok or a typed error, never panics.
// ---------------------------------------------------------------------------------

fn arb_huge_value() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::MAX - 1),
        Just(i64::MAX / 2),
        Just(1 << 62),
        Just(1 << 31),
        Just(3_074_457_345_618_258_602), // i64::MAX / 3
        Just(9_223_372_036_854_775_806), // 2 * (i64::MAX / 2)
        -4i64..=8,
        any::<i64>(),
    ]
}

fn arb_huge_layout() -> impl Strategy<Value = Layout> {
    (
        arb_shape(4, 2, i64::MAX),
        prop::collection::vec(
            prop_oneof![
                Just(1i64),
                Just(2),
                Just(3),
                Just(1 << 31),
                Just(1 << 62),
                Just(i64::MAX)
            ],
            4,
        ),
        prop::collection::vec(arb_huge_value(), 4),
    )
        .prop_filter_map("shape product overflows", |(shape, shapes, strides)| {
            let shape = shape.relabel(&mut shapes.into_iter());
            let stride = shape.relabel(&mut strides.into_iter());
            match Layout::new(shape.to_tuple(), stride.to_tuple()) {
                Ok(l) => Some(l),
                Err(e) => {
                    assert_eq!(e, LayoutError::Overflow);
                    None
                }
            }
        })
}

/// Only the error kinds a well-formed input may produce.
fn typed<T>(what: &str, result: Result<T, LayoutError>) -> Result<(), TestCaseError> {
    match result {
        Ok(_)
        | Err(LayoutError::Overflow)
        | Err(LayoutError::Divisibility)
        | Err(LayoutError::NotInjective)
        | Err(LayoutError::Capacity)
        | Err(LayoutError::NegativeStride) => Ok(()),
        Err(e) => Err(TestCaseError::fail(format!("{what}: unexpected error {e}"))),
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn huge_values_give_typed_errors_never_panics(
        a in arb_huge_layout(),
        b in arb_huge_layout(),
        index in arb_huge_value(),
        cotarget in arb_huge_value(),
    ) {
        typed("size", a.size())?;
        typed("cosize", a.cosize())?;
        typed("eval", a.eval(index))?;
        let crd = a.idx2crd(index);
        typed("crd2idx", a.crd2idx(&crd))?;
        typed("coalesce", coalesce(&a))?;
        typed("coalesce_modes", coalesce_modes(&a))?;
        typed("filter", filter(&a))?;
        typed("composition", composition(&a, &b))?;
        typed("complement", complement(&a, cotarget))?;
        typed("right_inverse", right_inverse(&a))?;
        typed("left_inverse", left_inverse(&a))?;
        typed("logical_divide", logical_divide(&a, &b))?;
        typed("zipped_divide", zipped_divide(&a, &b))?;
        typed("tiled_divide", tiled_divide(&a, &b))?;
        typed("logical_product", logical_product(&a, &b))?;
        typed("blocked_product", blocked_product(&a, &b))?;
        typed("raked_product", raked_product(&a, &b))?;
        if let Ok(identity) = IdentityLayout::new(a.shape()) {
            // An index outside the identity's domain is Incongruent.
            let in_domain = |r: Result<IntTuple, LayoutError>| match r {
                Err(LayoutError::Incongruent) => Ok(IntTuple::int(0)),
                other => other,
            };
            typed("identity eval", in_domain(identity.eval(index)))?;
            typed("identity compose_eval", in_domain(identity.compose_eval(&b, index)))?;
        }
        prop_assert_eq!(Layout::parse(&a.to_string()), Ok(a));
        // A product that cannot be an i64 is reported as such.
        if let Ok(s) = a.size() {
            if s > 1 {
                let doubled = Layout::from_modes(&[a, Layout::leaf(i64::MAX / s + 1, 1).unwrap()]);
                prop_assert_eq!(doubled, Err(LayoutError::Overflow));
            }
        }
    }

    #[test]
    fn huge_swizzle_parameters_are_rejected_not_overflowed(
        bits in any::<u32>(), base in any::<u32>(), shift in any::<i32>(), x in any::<i64>(),
    ) {
        match Swizzle::new(bits, base, shift) {
            Ok(s) => {
                prop_assert!(s.period() > 0);
                prop_assert_eq!(s.apply(s.apply(x)), x);
            }
            Err(e) => prop_assert_eq!(e, LayoutError::Divisibility),
        }
    }

    #[test]
    fn huge_numbers_in_text_give_overflow(digits in "[1-9][0-9]{19,24}", negative in any::<bool>()) {
        let text = if negative { format!("(4,2):(1,-{digits})") } else { format!("({digits},2)") };
        prop_assert_eq!(Layout::parse(&text), Err(LayoutError::Overflow));
    }
}

#[test]
fn extreme_integers_survive_display_and_parse() {
    let layout = Layout::from_flat(&[2, 3], &[i64::MIN, i64::MAX]).unwrap();
    assert_eq!(Layout::parse(&layout.to_string()), Ok(layout));
    assert_eq!(
        Layout::parse("4:-9223372036854775809"),
        Err(LayoutError::Overflow)
    );
    assert_eq!(
        Layout::parse("4:9223372036854775808"),
        Err(LayoutError::Overflow)
    );
}

#[test]
fn ceil_divisions_near_i64_max_do_not_overflow() {
    // Composition divides the tiler stride by A's mode sizes, rounding up: with
    // `rest + curr - 1` this overflowed for rest = 3 * (i64::MAX / 3).
    let b = Layout::leaf(2, 3 * (i64::MAX / 3)).unwrap();
    let a = Layout::from_flat(&[3, 4], &[4, 1]).unwrap();
    assert_eq!(
        composition(&a, &b),
        Ok(Layout::leaf(2, i64::MAX / 3).unwrap())
    );
    let a = Layout::from_flat(&[3, 4], &[1, 5]).unwrap();
    assert_eq!(composition(&a, &b), Err(LayoutError::Overflow));
    // complement rounds size(C) up the same way.
    let c = complement(&Layout::leaf(4, 1).unwrap(), i64::MAX).unwrap();
    assert_eq!(c, Layout::leaf(i64::MAX / 4 + 1, 4).unwrap());
    // Swizzle parameters whose sum overflows u32 are rejected.
    assert_eq!(Swizzle::new(1, u32::MAX, 1), Err(LayoutError::Divisibility));
    assert_eq!(
        Swizzle::new(1, 1 << 31, i32::MIN),
        Err(LayoutError::Divisibility)
    );
}

// ---------------------------------------------------------------------------------
// Capacity.
// ---------------------------------------------------------------------------------

#[test]
fn more_than_max_leaves_is_a_capacity_error() {
    let ones = vec!["1"; MAX_LEAVES + 1].join(",");
    assert_eq!(
        Layout::parse(&format!("({ones})")),
        Err(LayoutError::Capacity)
    );
    assert_eq!(
        IntTuple::flat(&[1; MAX_LEAVES + 1]),
        Err(LayoutError::Capacity)
    );
    let sixteen = vec!["2"; MAX_LEAVES].join(",");
    let big = Layout::parse(&format!("({sixteen})")).unwrap();
    assert_eq!(
        Layout::from_modes(&[big, Layout::leaf(2, 1).unwrap()]),
        Err(LayoutError::Capacity)
    );
    assert_eq!(
        IntTuple::tuple(&[big.shape(), IntTuple::int(1)]),
        Err(LayoutError::Capacity)
    );
    // Depth: MAX_DEPTH parentheses parse, one more does not.
    assert!(Layout::parse("((((4))))").is_ok());
    assert_eq!(Layout::parse("(((((4)))))"), Err(LayoutError::Capacity));
}

#[test]
fn sixteen_leaf_layouts_whose_results_fit_are_not_capacity_errors() {
    // 16 leaves of 2, compact in reverse order: no two neighbours coalesce.
    let strides: Vec<i64> = (0..16).rev().map(|k| 1i64 << k).collect();
    let layout = Layout::from_flat(&[2; 16], &strides).unwrap();
    assert_eq!(
        complement(&layout, 1 << 16),
        Ok(Layout::leaf(1, 0).unwrap())
    );
    assert_eq!(
        complement(&layout, 1 << 18),
        Ok(Layout::leaf(4, 1 << 16).unwrap())
    );
    let inverse = left_inverse(&layout).unwrap();
    let right = right_inverse(&layout).unwrap();
    for i in 0..1 << 16 {
        assert_eq!(inverse.eval(layout.eval(i).unwrap()), Ok(i));
        assert_eq!(layout.eval(right.eval(i).unwrap()), Ok(i));
    }
    // With a gap below every stride the left inverse needs 17 modes: a typed error.
    let gapped: Vec<i64> = strides.iter().map(|d| 2 * d).collect();
    let layout = Layout::from_flat(&[2; 16], &gapped).unwrap();
    assert_eq!(left_inverse(&layout), Err(LayoutError::Capacity));
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn results_beyond_capacity_are_capacity_errors(
        a in arb_layout_with(Strides::Nested, 12, 3, 1 << 40),
        b in arb_layout_with(Strides::Nested, 12, 3, 1 << 40),
    ) {
        // Every result is Ok with at most MAX_LEAVES leaves, or a typed error.
        for result in [
            blocked_product(&a, &b),
            raked_product(&a, &b),
            logical_product(&a, &b),
            logical_divide(&a, &b),
            tiled_divide(&a, &b),
            composition(&a, &b),
        ] {
            match result {
                Ok(l) => prop_assert!(l.leaf_count() <= MAX_LEAVES),
                Err(e) => typed::<()>("capacity", Err(e))?,
            }
        }
        // Concatenating two layouts with more than MAX_LEAVES leaves in all fails.
        let joined = Layout::from_modes(&[a, b]);
        if a.leaf_count() + b.leaf_count() > MAX_LEAVES {
            prop_assert_eq!(joined, Err(LayoutError::Capacity));
        } else {
            prop_assert!(joined.is_ok());
        }
    }
}
