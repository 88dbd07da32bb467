//! The worked examples of CuTe's layout documentation (NVIDIA/cutlass
//! `media/docs/cpp/cute/01_layout.md` and `02_layout_algebra.md`, with the figures
//! `media/images/cute/*.png` they refer to), each with its documented result.
//!
//! Where our result is written differently from the documentation but is the same
//! function, a comment says which notation detail differs and the test checks the
//! function as well as our exact form.

use fragmask_layout::{
    blocked_product, coalesce, coalesce_modes, complement, composition, composition_by_mode,
    left_inverse, logical_divide, logical_divide_by_mode, logical_product, logical_product_by_mode,
    raked_product, right_inverse, tiled_divide_by_mode, zipped_divide, zipped_divide_by_mode,
    IntTuple, Layout,
};

fn l(text: &str) -> Layout {
    Layout::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn t(text: &str) -> IntTuple {
    IntTuple::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Every offset of `layout` over its domain.
fn images(layout: &Layout) -> Vec<i64> {
    (0..layout.size().unwrap())
        .map(|i| layout.eval(i).unwrap())
        .collect()
}

/// `a` and `b` are the same function on `b`'s domain (sizes must agree).
fn assert_same_function(a: &Layout, b: &Layout) {
    assert_eq!(a.size(), b.size(), "{a} vs {b}");
    assert_eq!(images(a), images(b), "{a} vs {b}");
}

// ---------------------------------------------------------------------------------
// 01_layout.md: coordinate and index mapping.
// ---------------------------------------------------------------------------------

#[test]
fn idx2crd_of_shape_3_2_3_matches_the_table() {
    let layout = Layout::compact(t("(3,(2,3))")).unwrap();
    assert_eq!(layout.idx2crd(16), t("(1,(1,2))"));
    // The 1-D / natural coordinate table of the same section.
    let natural = [
        "(0,(0,0))",
        "(1,(0,0))",
        "(2,(0,0))",
        "(0,(1,0))",
        "(1,(1,0))",
        "(2,(1,0))",
        "(0,(0,1))",
        "(1,(0,1))",
        "(2,(0,1))",
        "(0,(1,1))",
        "(1,(1,1))",
        "(2,(1,1))",
        "(0,(0,2))",
        "(1,(0,2))",
        "(2,(0,2))",
        "(0,(1,2))",
        "(1,(1,2))",
        "(2,(1,2))",
    ];
    for (index, crd) in natural.iter().enumerate() {
        assert_eq!(layout.idx2crd(index as i64), t(crd), "index {index}");
    }
}

#[test]
fn crd2idx_of_3_2_3_by_3_12_1_is_17_for_every_form_of_the_coordinate() {
    let layout = l("(3,(2,3)):(3,(12,1))");
    assert_eq!(layout.crd2idx(&t("16")), Ok(17));
    assert_eq!(layout.crd2idx(&t("(1,5)")), Ok(17));
    assert_eq!(layout.crd2idx(&t("(1,(1,2))")), Ok(17));
    // The 3x6 index table of the same section, row i, 1-D column j.
    let table = [
        [0, 12, 1, 13, 2, 14],
        [3, 15, 4, 16, 5, 17],
        [6, 18, 7, 19, 8, 20],
    ];
    for (row, values) in table.iter().enumerate() {
        for (col, &value) in values.iter().enumerate() {
            let crd = IntTuple::flat(&[row as i64, col as i64]).unwrap();
            assert_eq!(layout.crd2idx(&crd), Ok(value), "({row},{col})");
        }
    }
}

// ---------------------------------------------------------------------------------
// Coalesce.
// ---------------------------------------------------------------------------------

#[test]
fn coalesce_of_2_1_6_by_1_6_2_is_12_1() {
    assert_eq!(coalesce(&l("(2,(1,6)):(1,(6,2))")), Ok(l("12:1")));
}

#[test]
fn coalesce_by_mode_of_2_1_6_by_1_6_2_is_2_6_by_1_2() {
    assert_eq!(
        coalesce_modes(&l("(2,(1,6)):(1,(6,2))")),
        Ok(l("(2,6):(1,2)"))
    );
}

#[test]
fn coalesce_column_major_2_4_acts_as_8_1() {
    assert_eq!(coalesce(&l("(2,4):(1,2)")), Ok(l("8:1")));
}

#[test]
fn coalesce_binary_rules() {
    // s0:d0 ++ 1:d1 => s0:d0 ; 1:d0 ++ s1:d1 => s1:d1
    assert_eq!(coalesce(&l("(3,1):(5,7)")), Ok(l("3:5")));
    assert_eq!(coalesce(&l("(1,3):(7,5)")), Ok(l("3:5")));
    // s0:d0 ++ s1:s0*d0 => s0*s1:d0
    assert_eq!(coalesce(&l("(3,4):(5,15)")), Ok(l("12:5")));
    // otherwise both modes stay
    assert_eq!(coalesce(&l("(3,4):(5,16)")), Ok(l("(3,4):(5,16)")));
}

// ---------------------------------------------------------------------------------
// Composition.
// ---------------------------------------------------------------------------------

#[test]
fn composition_of_6_2_by_8_2_with_4_3_by_3_1_is_documented() {
    let a = l("(6,2):(8,2)");
    let b = l("(4,3):(3,1)");
    let r = composition(&a, &b).unwrap();
    assert_eq!(r, l("((2,2),3):((24,2),8)"));
    // The R(c) table of the documentation.
    assert_eq!(
        images(&r),
        vec![0, 24, 2, 26, 8, 32, 10, 34, 16, 40, 18, 42]
    );
}

#[test]
fn composition_worked_example_1_steps() {
    let a = l("(6,2):(8,2)");
    // (6,2):(8,2) o 4:3 = (2,2):(24,2)
    assert_eq!(composition(&a, &l("4:3")), Ok(l("(2,2):(24,2)")));
    // (6,2):(8,2) o 3:1: the documentation writes (3,1):(8,2) before coalescing each
    // mode; we drop the size-1 mode at once.
    let r = composition(&a, &l("3:1")).unwrap();
    assert_eq!(r, l("3:8"));
    assert_same_function(&r, &l("(3,1):(8,2)"));
}

#[test]
fn composition_reshapes_20_2_into_a_row_major_5x4_matrix() {
    assert_eq!(
        composition(&l("20:2"), &l("(5,4):(4,1)")),
        Ok(l("(5,4):(8,2)"))
    );
    assert_eq!(composition(&l("20:2"), &l("5:4")), Ok(l("5:8")));
    assert_eq!(composition(&l("20:2"), &l("4:1")), Ok(l("4:2")));
}

#[test]
fn composition_reshapes_10_2_into_a_column_major_5x4_matrix() {
    let a = l("(10,2):(16,4)");
    let r = composition(&a, &l("(5,4):(1,5)")).unwrap();
    // CuTe prints (_5,(_2,_2)):(_16,(_80,_4)) with static integers; that is our form.
    assert_eq!(r, l("(5,(2,2)):(16,(80,4))"));
    // With dynamic integers CuTe keeps the size-1 mode: ((5,1),(2,2)):((16,4),(80,4)).
    let dynamic = l("((5,1),(2,2)):((16,4),(80,4))");
    assert_same_function(&r, &dynamic);
    assert_eq!(composition(&a, &l("5:1")), Ok(l("5:16")));
    assert_eq!(composition(&a, &l("4:5")), Ok(l("(2,2):(80,4)")));
}

/// `(3,6,2,8):(w,x,y,z)` with strides that do not coalesce.
const W: i64 = 1000;
const X: i64 = 100;
const Y: i64 = 10;
const Z: i64 = 1;

fn a3628() -> Layout {
    Layout::from_flat(&[3, 6, 2, 8], &[W, X, Y, Z]).unwrap()
}

#[test]
fn composition_divides_out_strides_from_the_left() {
    // "(6,2) / d": A o (size/d):d is the strided layout.
    let a = Layout::from_flat(&[6, 2], &[X, Y]).unwrap();
    assert_eq!(
        composition(&a, &l("6:2")),
        Ok(Layout::from_flat(&[3, 2], &[2 * X, Y]).unwrap())
    );
    assert_eq!(
        composition(&a, &l("4:3")),
        Ok(Layout::from_flat(&[2, 2], &[3 * X, Y]).unwrap())
    );
    // (6,2)/6 = (1,2): the size-1 mode is dropped.
    assert_eq!(composition(&a, &l("2:6")), Ok(Layout::leaf(2, Y).unwrap()));
    // (6,2)/12 = (1,1)
    assert_eq!(composition(&a, &l("1:12")).unwrap().size(), Ok(1));
    // (3,6,2,8) / 3 = (1,6,2,8), /6 = (1,3,2,8), /9 = (1,2,2,8), /72 = (1,1,1,4).
    // The documentation gives the strides of /72 as (72w,24x,4x,2z); the third is 4y,
    // a typo there, and it multiplies a size-1 mode, so it cannot be observed.
    let a = a3628();
    let expect = |shapes: &[i64], strides: &[i64]| Layout::from_flat(shapes, strides).unwrap();
    assert_eq!(
        composition(&a, &l("96:3")),
        Ok(expect(&[6, 2, 8], &[X, Y, Z]))
    );
    assert_eq!(
        composition(&a, &l("48:6")),
        Ok(expect(&[3, 2, 8], &[2 * X, Y, Z]))
    );
    assert_eq!(
        composition(&a, &l("32:9")),
        Ok(expect(&[2, 2, 8], &[3 * X, Y, Z]))
    );
    assert_eq!(
        composition(&a, &l("4:72")),
        Ok(Layout::leaf(4, 2 * Z).unwrap())
    );
}

#[test]
fn composition_mods_out_shapes_from_the_left() {
    // "(6,2) % s": A o s:1 keeps the first s elements.
    let a = Layout::from_flat(&[6, 2], &[X, Y]).unwrap();
    assert_eq!(composition(&a, &l("2:1")), Ok(Layout::leaf(2, X).unwrap()));
    assert_eq!(composition(&a, &l("3:1")), Ok(Layout::leaf(3, X).unwrap()));
    assert_eq!(composition(&a, &l("6:1")), Ok(Layout::leaf(6, X).unwrap()));
    assert_eq!(composition(&a, &l("12:1")), Ok(a));
    let a = a3628();
    // (3,6,2,8) % 6 = (3,2,1,1), % 9 = (3,3,1,1)
    assert_eq!(
        composition(&a, &l("6:1")),
        Ok(Layout::from_flat(&[3, 2], &[W, X]).unwrap())
    );
    assert_eq!(
        composition(&a, &l("9:1")),
        Ok(Layout::from_flat(&[3, 3], &[W, X]).unwrap())
    );
    // (1,2,2,8) % 2 = (1,2,1,1), % 16 = (1,2,2,4); our A has no size-1 leading mode.
    let a = Layout::from_flat(&[2, 2, 8], &[X, Y, Z]).unwrap();
    assert_eq!(composition(&a, &l("2:1")), Ok(Layout::leaf(2, X).unwrap()));
    assert_eq!(
        composition(&a, &l("16:1")),
        Ok(Layout::from_flat(&[2, 2, 4], &[X, Y, Z]).unwrap())
    );
}

#[test]
fn composition_of_3_6_2_8_with_16_9_is_1_2_2_4() {
    // (3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z); we drop the size-1 mode.
    let r = composition(&a3628(), &l("16:9")).unwrap();
    assert_eq!(r, Layout::from_flat(&[2, 2, 4], &[3 * X, Y, Z]).unwrap());
    assert_same_function(
        &r,
        &Layout::from_flat(&[1, 2, 2, 4], &[9 * W, 3 * X, Y, Z]).unwrap(),
    );
}

#[test]
fn composition_by_mode_with_tiler_3_4_and_8_2() {
    let a = l("(12,(4,8)):(59,(13,1))");
    let r = composition_by_mode(&a, &[l("3:4"), l("8:2")]).unwrap();
    assert_eq!(r, l("(3,(2,4)):(236,(26,1))"));
    // Identical to composing mode by mode.
    let same = Layout::from_modes(&[
        composition(&a.mode(0).unwrap(), &l("3:4")).unwrap(),
        composition(&a.mode(1).unwrap(), &l("8:2")).unwrap(),
    ])
    .unwrap();
    assert_eq!(r, same);
}

#[test]
fn composition_by_mode_with_shape_tiler_3_8() {
    // A shape (3,8) as a tiler means <3:1, 8:1>.
    let a = l("(12,(4,8)):(59,(13,1))");
    let r = composition_by_mode(&a, &[l("3:1"), l("8:1")]).unwrap();
    assert_eq!(r, l("(3,(4,2)):(59,(13,1))"));
}

// ---------------------------------------------------------------------------------
// Complement.
// ---------------------------------------------------------------------------------

#[test]
fn complement_examples_match_the_documentation() {
    assert_eq!(complement(&l("4:1"), 24), Ok(l("6:4")));
    assert_eq!(complement(&l("6:4"), 24), Ok(l("4:1")));
    assert_eq!(complement(&l("(4,6):(1,4)"), 24), Ok(l("1:0")));
    assert_eq!(complement(&l("4:2"), 24), Ok(l("(2,3):(1,8)")));
    assert_eq!(complement(&l("(2,4):(1,6)"), 24), Ok(l("3:2")));
    assert_eq!(complement(&l("(2,2):(1,6)"), 24), Ok(l("(3,2):(2,12)")));
}

#[test]
fn complement_examples_complete_a_bijection_onto_24() {
    for (layout, rest) in [
        ("4:1", "6:4"),
        ("6:4", "4:1"),
        ("4:2", "(2,3):(1,8)"),
        ("(2,4):(1,6)", "3:2"),
        ("(2,2):(1,6)", "(3,2):(2,12)"),
    ] {
        let joined = Layout::from_modes(&[l(layout), l(rest)]).unwrap();
        assert_eq!(joined.cosize(), Ok(24), "{joined}");
        let mut offsets = images(&joined);
        offsets.sort_unstable();
        assert_eq!(offsets, (0..24).collect::<Vec<_>>(), "{joined}");
    }
}

// ---------------------------------------------------------------------------------
// Divide.
// ---------------------------------------------------------------------------------

#[test]
fn logical_divide_1d_example() {
    let a = l("(4,2,3):(2,1,8)");
    let b = l("4:2");
    assert_eq!(complement(&b, 24), Ok(l("(2,3):(1,8)")));
    let joined = Layout::from_modes(&[b, l("(2,3):(1,8)")]).unwrap();
    assert_eq!(joined, l("(4,(2,3)):(2,(1,8))"));
    assert_eq!(
        composition(&a, &joined),
        Ok(l("((2,2),(2,3)):((4,1),(2,8))"))
    );
    assert_eq!(logical_divide(&a, &b), Ok(l("((2,2),(2,3)):((4,1),(2,8))")));
}

fn divide_2d_a() -> Layout {
    l("(9,(4,8)):(59,(13,1))")
}

fn divide_2d_tilers() -> [Layout; 2] {
    [l("3:3"), l("(2,4):(1,8)")]
}

#[test]
fn logical_divide_2d_example_matches_the_figure() {
    // divide2.png: A ⊘ <3:3, (2,4):(1,8)>.
    let r = logical_divide_by_mode(&divide_2d_a(), &divide_2d_tilers()).unwrap();
    assert_eq!(r, l("((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"));
    // "the first mode of each mode of the result is (3,(2,4)):(177,(13,2)), precisely
    // the composition".
    let firsts = Layout::from_modes(&[
        r.mode(0).unwrap().mode(0).unwrap(),
        r.mode(1).unwrap().mode(0).unwrap(),
    ])
    .unwrap();
    assert_eq!(firsts, l("(3,(2,4)):(177,(13,2))"));
    assert_eq!(
        composition_by_mode(&divide_2d_a(), &divide_2d_tilers()),
        Ok(firsts)
    );
    // First row of the lower table of the figure: columns 0..8 and 8..16.
    let row0: Vec<i64> = (0..16)
        .map(|col| r.crd2idx(&IntTuple::flat(&[0, col]).unwrap()).unwrap())
        .collect();
    assert_eq!(
        row0,
        vec![0, 13, 2, 15, 4, 17, 6, 19, 26, 39, 28, 41, 30, 43, 32, 45]
    );
}

#[test]
fn zipped_divide_2d_example_has_shape_3_8_by_3_4() {
    let zd = zipped_divide_by_mode(&divide_2d_a(), &divide_2d_tilers()).unwrap();
    assert_eq!(zd, l("((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"));
    let tile = zd.mode(0).unwrap();
    let rest = zd.mode(1).unwrap();
    assert_eq!(tile.mode(0).unwrap().size(), Ok(3));
    assert_eq!(tile.mode(1).unwrap().size(), Ok(8));
    assert_eq!(rest.mode(0).unwrap().size(), Ok(3));
    assert_eq!(rest.mode(1).unwrap().size(), Ok(4));
    // layout<0>(zipped_divide(a, b)) == composition(a, b)
    assert_eq!(
        Ok(tile),
        composition_by_mode(&divide_2d_a(), &divide_2d_tilers())
    );
    // divide3.png: zd(row, col) for a few cells (row = offset in tile, col = tile).
    let at = |row: i64, col: i64| zd.crd2idx(&IntTuple::flat(&[row, col]).unwrap()).unwrap();
    assert_eq!(at(0, 1), 59);
    assert_eq!(at(0, 3), 26);
    assert_eq!(at(0, 6), 1);
    assert_eq!(at(3, 0), 13);
    assert_eq!(at(12, 0), 4);
    assert_eq!(at(23, 11), 518);
    // "The offset to the (1,2)th tile is zd(0,(1,2))": rest (1,2) = rest index 1 + 3*2.
    assert_eq!(zd.crd2idx(&t("(0,(1,2))")), Ok(at(0, 7)));
}

#[test]
fn tiled_divide_2d_example_unpacks_the_rest() {
    let td = tiled_divide_by_mode(&divide_2d_a(), &divide_2d_tilers()).unwrap();
    assert_eq!(td, l("((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))"));
}

#[test]
fn zipped_divide_by_a_layout_is_logical_divide() {
    let a = l("(4,2,3):(2,1,8)");
    assert_eq!(zipped_divide(&a, &l("4:2")), logical_divide(&a, &l("4:2")));
}

// ---------------------------------------------------------------------------------
// Product.
// ---------------------------------------------------------------------------------

#[test]
fn logical_product_1d_example() {
    let a = l("(2,2):(4,1)");
    assert_eq!(complement(&a, 24), Ok(l("(2,3):(2,8)")));
    assert_eq!(
        composition(&l("(2,3):(2,8)"), &l("6:1")),
        Ok(l("(2,3):(2,8)"))
    );
    let r = logical_product(&a, &l("6:1")).unwrap();
    assert_eq!(r, l("((2,2),(2,3)):((4,1),(2,8))"));
    // "the result is identical to the result of the 1-D Logical Divide example".
    assert_eq!(Ok(r), logical_divide(&l("(4,2,3):(2,1,8)"), &l("4:2")));
}

#[test]
fn logical_product_with_4_2_by_2_1_matches_the_figure() {
    // product2.png: (2,2):(4,1) ⊗ (4,2):(2,1) = ((2,2),(4,2)):((4,1),(8,2)).
    let r = logical_product(&l("(2,2):(4,1)"), &l("(4,2):(2,1)")).unwrap();
    assert_eq!(r, l("((2,2),(4,2)):((4,1),(8,2))"));
    assert_eq!(
        images(&r),
        vec![
            0, 4, 1, 5, 8, 12, 9, 13, 16, 20, 17, 21, 24, 28, 25, 29, 2, 6, 3, 7, 10, 14, 11, 15,
            18, 22, 19, 23, 26, 30, 27, 31
        ]
    );
}

#[test]
fn logical_product_2d_by_mode_matches_the_figure() {
    // product2d.png: (2,5):(5,1) ⊗ <3:5, 4:6> = ((2,3),(5,4)):((5,10),(1,30)).
    let r = logical_product_by_mode(&l("(2,5):(5,1)"), &[l("3:5"), l("4:6")]).unwrap();
    assert_eq!(r, l("((2,3),(5,4)):((5,10),(1,30))"));
}

/// The 6x20 table of productblocked2d.png / product2d.png: row r, column c holds
/// `(c/5)*30 + (r/2)*10 + (r%2)*5 + c%5`.
fn blocked_table(row: i64, col: i64) -> i64 {
    (col / 5) * 30 + (row / 2) * 10 + (row % 2) * 5 + col % 5
}

#[test]
fn blocked_product_2d_matches_the_figure() {
    let r = blocked_product(&l("(2,5):(5,1)"), &l("(3,4):(1,3)")).unwrap();
    // The figure shows (6,(5,4)):(5,(1,30)): CuTe then coalesced mode 0. Current CuTe
    // (`zip(get<0>(result), get<1>(result))`) and we keep ((2,3),(5,4)):((5,10),(1,30)),
    // the same function.
    assert_eq!(r, l("((2,3),(5,4)):((5,10),(1,30))"));
    assert_same_function(&r, &l("(6,(5,4)):(5,(1,30))"));
    for row in 0..6 {
        for col in 0..20 {
            let crd = IntTuple::flat(&[row, col]).unwrap();
            assert_eq!(
                r.crd2idx(&crd),
                Ok(blocked_table(row, col)),
                "({row},{col})"
            );
        }
    }
}

#[test]
fn raked_product_2d_matches_the_figure() {
    let r = raked_product(&l("(2,5):(5,1)"), &l("(3,4):(1,3)")).unwrap();
    assert_eq!(r, l("((3,2),(4,5)):((10,5),(30,1))"));
    // productraked2d.png, first row and first column.
    let at = |row: i64, col: i64| r.crd2idx(&IntTuple::flat(&[row, col]).unwrap()).unwrap();
    let row0: Vec<i64> = (0..20).map(|col| at(0, col)).collect();
    assert_eq!(
        row0,
        vec![0, 30, 60, 90, 1, 31, 61, 91, 2, 32, 62, 92, 3, 33, 63, 93, 4, 34, 64, 94]
    );
    let col0: Vec<i64> = (0..6).map(|row| at(row, 0)).collect();
    assert_eq!(col0, vec![0, 10, 20, 5, 15, 25]);
    assert_eq!(at(5, 19), 119);
}

// ---------------------------------------------------------------------------------
// Inverses (the layouts of cutlass test/unit/cute/core/inverse_{right,left}.cpp and
// test/python/pycute; those tests check the post-conditions, so do we, plus our form).
// ---------------------------------------------------------------------------------

const INVERSE_CASES: [&str; 14] = [
    "1:0",
    "1:1",
    "(1,1):(0,0)",
    "4:1",
    "4:2",
    "(8,4):(1,8)",
    "(8,4):(4,1)",
    "(2,4,6):(1,2,8)",
    "(2,4,6):(4,1,8)",
    "(4,2):(1,16)",
    "(128,128):(65536,1)",
    "(128,3,160):(65536,512,1)",
    "(32,4,4,4):(262144,4,8388608,1)",
    "(2,4):(4,1)",
];

#[test]
fn right_inverse_examples_satisfy_l_of_r_is_identity() {
    for text in
        INVERSE_CASES
            .iter()
            .chain(&["4:0", "(3,7):(0,0)", "(2,4):(0,2)", "(2,2,2):(4,0,1)"])
    {
        let layout = l(text);
        let inverse = right_inverse(&layout).unwrap();
        for i in 0..inverse.size().unwrap() {
            assert_eq!(
                layout.eval(inverse.eval(i).unwrap()),
                Ok(i),
                "{text} -> {inverse} at {i}"
            );
        }
    }
}

#[test]
fn right_inverse_examples_have_the_expected_form() {
    assert_eq!(right_inverse(&l("(8,4):(4,1)")), Ok(l("(4,8):(8,1)")));
    assert_eq!(
        right_inverse(&l("(2,4,6):(4,1,8)")),
        Ok(l("(4,2,6):(2,1,8)"))
    );
    assert_eq!(right_inverse(&l("4:2")), Ok(l("1:0")));
    assert_eq!(right_inverse(&l("(4,2):(1,16)")), Ok(l("4:1")));
    // Broadcast modes are skipped, not a reason to stop: (2,2,2):(4,0,1) -> 2:4.
    assert_eq!(right_inverse(&l("(2,2,2):(4,0,1)")), Ok(l("2:4")));
    assert_eq!(right_inverse(&l("(2,4):(0,2)")), Ok(l("1:0")));
    assert_eq!(right_inverse(&l("(4,2):(0,1)")), Ok(l("2:4")));
}

#[test]
fn left_inverse_examples_satisfy_r_of_l_is_identity() {
    for text in INVERSE_CASES {
        let layout = l(text);
        let inverse = left_inverse(&layout).unwrap();
        for i in 0..layout.size().unwrap() {
            assert_eq!(
                inverse.eval(layout.eval(i).unwrap()),
                Ok(i),
                "{text} -> {inverse} at {i}"
            );
        }
    }
}

#[test]
fn left_inverse_examples_have_the_expected_form() {
    assert_eq!(left_inverse(&l("(2,4):(4,1)")), Ok(l("(4,2):(2,1)")));
    assert_eq!(left_inverse(&l("(8,4):(4,1)")), Ok(l("(4,8):(8,1)")));
    // Holes map to 0: 4:2 reads offset bit 1.
    assert_eq!(left_inverse(&l("4:2")), Ok(l("(2,4):(0,1)")));
}
