//! The layout algebra evaluated at compile time: every value below is a `const` item
//! and every check a `static_assertions::const_assert!`. If any operation were not
//! const-evaluable, or returned an error, this file would not compile.

use fragmask_layout::{
    blocked_product, coalesce, complement, composition, left_inverse, logical_divide,
    logical_product, raked_product, right_inverse, zipped_divide_by_mode, IdentityLayout, IntTuple,
    Layout, LayoutError, Swizzle,
};
use static_assertions::{const_assert, const_assert_eq};

/// Unwraps at compile time; an error becomes a compile error.
const fn ok(result: Result<Layout, LayoutError>) -> Layout {
    match result {
        Ok(layout) => layout,
        Err(_) => panic!("layout error"),
    }
}

const fn num(result: Result<i64, LayoutError>) -> i64 {
    match result {
        Ok(value) => value,
        Err(_) => panic!("layout error"),
    }
}

const fn tuple(result: Result<IntTuple, LayoutError>) -> IntTuple {
    match result {
        Ok(value) => value,
        Err(_) => panic!("tuple error"),
    }
}

const fn parse(text: &str) -> Layout {
    ok(Layout::parse(text))
}

// ---------------------------------------------------------------------------------
// The SM90 wgmma m64nNk16 f32 accumulator (CuTe's CLayout_64xN), thread-value layout
// into a column-major 64xN tile.
// ---------------------------------------------------------------------------------

/// `((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`.
const fn clayout_64xn(n: i64) -> Layout {
    let thread = tuple(IntTuple::flat(&[4, 8, 4]));
    let value = tuple(IntTuple::flat(&[2, 2, n / 8]));
    let shape = tuple(IntTuple::tuple(&[thread, value]));
    let stride = tuple(IntTuple::parse("((128,1,16),(64,8,512))"));
    ok(Layout::new(shape, stride))
}

/// Thread `t`, register `i` of the accumulator hold `(row, col)` of the tile
/// (docs/architecture.md fact 1); checks every element against the layout.
const fn matches_fact_1(layout: &Layout, n: i64) -> bool {
    let mut t = 0;
    while t < 128 {
        let mut i = 0;
        while i < n / 2 {
            let row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (t % 4) + (i % 2);
            if num(layout.eval(t + 128 * i)) != row + 64 * col {
                return false;
            }
            i += 1;
        }
        t += 1;
    }
    true
}

const ACC_16: Layout = clayout_64xn(16);
const ACC_64: Layout = clayout_64xn(64);
const ACC_256: Layout = clayout_64xn(256);

const_assert!(ACC_16.const_eq(&parse("((4,8,4),(2,2,2)):((128,1,16),(64,8,512))")));
const_assert_eq!(num(ACC_16.size()), 128 * 8);
const_assert_eq!(num(ACC_64.size()), 128 * 32);
const_assert_eq!(num(ACC_256.size()), 128 * 128);
const_assert_eq!(num(ACC_64.cosize()), 64 * 64);
const_assert_eq!(num(ACC_256.cosize()), 64 * 256);
const_assert_eq!(ACC_64.rank(), 2);
const_assert_eq!(ACC_64.depth(), 2);
const_assert_eq!(ACC_64.leaf_count(), 6);
// Thread 37, register 5: row 17, column 11.
const_assert_eq!(num(ACC_64.eval(37 + 128 * 5)), 17 + 64 * 11);
const_assert!(matches_fact_1(&ACC_16, 16));
const_assert!(matches_fact_1(&ACC_64, 64));
const_assert!(matches_fact_1(&ACC_256, 256));

/// `L(R(i)) == i` over R's whole domain.
const fn is_right_inverse(layout: &Layout, inverse: &Layout) -> bool {
    let size = num(inverse.size());
    let mut i = 0;
    while i < size {
        if num(layout.eval(num(inverse.eval(i)))) != i {
            return false;
        }
        i += 1;
    }
    true
}

/// `R(L(i)) == i` over L's whole domain.
const fn is_left_inverse(layout: &Layout, inverse: &Layout) -> bool {
    let size = num(layout.size());
    let mut i = 0;
    while i < size {
        if num(inverse.eval(num(layout.eval(i)))) != i {
            return false;
        }
        i += 1;
    }
    true
}

// The accumulator is a bijection onto the 64x64 tile: its right inverse maps tile
// offsets back to (thread, register).
const ACC_64_INVERSE: Layout = ok(right_inverse(&ACC_64));
const_assert_eq!(num(ACC_64_INVERSE.size()), 64 * 64);
const_assert!(is_right_inverse(&ACC_64, &ACC_64_INVERSE));
const ACC_64_LEFT: Layout = ok(left_inverse(&ACC_64));
const_assert!(is_left_inverse(&ACC_64, &ACC_64_LEFT));

// ---------------------------------------------------------------------------------
// The algebra's documented examples, at compile time.
// ---------------------------------------------------------------------------------

const COALESCED: Layout = ok(coalesce(&parse("(2,(1,6)):(1,(6,2))")));
const_assert!(COALESCED.const_eq(&parse("12:1")));

const COMPOSED: Layout = ok(composition(&parse("(6,2):(8,2)"), &parse("(4,3):(3,1)")));
const_assert!(COMPOSED.const_eq(&parse("((2,2),3):((24,2),8)")));
const_assert_eq!(num(COMPOSED.eval(11)), 42);

const COMPLEMENT: Layout = ok(complement(&parse("(2,2):(1,6)"), 24));
const_assert!(COMPLEMENT.const_eq(&parse("(3,2):(2,12)")));

const DIVIDED: Layout = ok(logical_divide(&parse("(4,2,3):(2,1,8)"), &parse("4:2")));
const_assert!(DIVIDED.const_eq(&parse("((2,2),(2,3)):((4,1),(2,8))")));

const PRODUCT: Layout = ok(logical_product(&parse("(2,2):(4,1)"), &parse("6:1")));
const_assert!(PRODUCT.const_eq(&DIVIDED));

const BLOCKED: Layout = ok(blocked_product(
    &parse("(2,5):(5,1)"),
    &parse("(3,4):(1,3)"),
));
const_assert!(BLOCKED.const_eq(&parse("((2,3),(5,4)):((5,10),(1,30))")));
const RAKED: Layout = ok(raked_product(&parse("(2,5):(5,1)"), &parse("(3,4):(1,3)")));
const_assert!(RAKED.const_eq(&parse("((3,2),(4,5)):((10,5),(30,1))")));

// A 128x128 tile cut into 64x16 tiles: ((tile rows, tile cols), (tiles down, tiles across)).
const TILE_128: Layout = parse("(128,128)");
const TILED: Layout = ok(zipped_divide_by_mode(
    &TILE_128,
    &[parse("64:1"), parse("16:1")],
));
const_assert!(TILED.const_eq(&parse("((64,16),(2,8)):((1,128),(64,2048))")));

// Coordinates.
const ID: Layout = parse("(3,(2,3)):(3,(12,1))");
const_assert!(ID
    .idx2crd(16)
    .const_eq(&tuple(IntTuple::parse("(1,(1,2))"))));
const_assert_eq!(num(ID.crd2idx(&tuple(IntTuple::parse("(1,5)")))), 17);
const IDENTITY: IdentityLayout = match IdentityLayout::new(tuple(IntTuple::parse("(4,8)"))) {
    Ok(id) => id,
    Err(_) => panic!("identity"),
};
const_assert!(match IDENTITY.eval(9) {
    Ok(crd) => crd.const_eq(&tuple(IntTuple::parse("(1,2)"))),
    Err(_) => false,
});

// Errors are values too.
const_assert!(matches!(
    Layout::parse("(4,8):(8"),
    Err(LayoutError::Parse { position: 8, .. })
));
const_assert!(matches!(
    Layout::parse("(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)"),
    Err(LayoutError::Capacity)
));
const_assert!(matches!(
    composition(&parse("(3,4):(1,5)"), &parse("2:9223372036854775806")),
    Err(LayoutError::Overflow)
));
const_assert!(matches!(
    complement(&parse("(2,2):(1,1)"), 8),
    Err(LayoutError::NotInjective)
));

// ---------------------------------------------------------------------------------
// Swizzle<3,4,3>: an involution and a bijection on its period, checked in full.
// ---------------------------------------------------------------------------------

const SW128: Swizzle = match Swizzle::new(3, 4, 3) {
    Ok(sw) => sw,
    Err(_) => panic!("swizzle"),
};
const_assert_eq!(SW128.period(), 1 << 10);

const fn is_bijective_involution(sw: &Swizzle) -> bool {
    let mut seen = [false; 1 << 10];
    let mut x = 0;
    while x < sw.period() {
        let y = sw.apply(x);
        if y < 0 || y >= sw.period() || seen[y as usize] || sw.apply(y) != x {
            return false;
        }
        seen[y as usize] = true;
        x += 1;
    }
    true
}
const_assert!(is_bijective_involution(&SW128));
const_assert_eq!(SW128.apply(0b001_0000_0000), 0b001_0010_0000);

#[test]
fn const_values_agree_with_runtime_evaluation() {
    // The same computations at run time give the same values.
    assert_eq!(
        ACC_64,
        Layout::parse("((4,8,4),(2,2,8)):((128,1,16),(64,8,512))").unwrap()
    );
    assert_eq!(right_inverse(&ACC_64), Ok(ACC_64_INVERSE));
    assert_eq!(
        coalesce(&Layout::parse("(2,(1,6)):(1,(6,2))").unwrap()),
        Ok(COALESCED)
    );
    assert_eq!(TILED.to_string(), "((64,16),(2,8)):((1,128),(64,2048))");
}
