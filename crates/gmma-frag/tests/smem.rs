//! wgmma shared-memory atoms, descriptors, and the write-up's K-major brick layout.

use fragmask_gmma_frag::{
    kmajor_interleaved_layout, FragError, GmmaDescriptor, Major, SmemAtom, SmemSwizzle,
};
use fragmask_layout::{composition_by_mode, Layout, SwizzledLayout};

const SWIZZLES: [SmemSwizzle; 4] = [
    SmemSwizzle::Interleave,
    SmemSwizzle::B32,
    SmemSwizzle::B64,
    SmemSwizzle::B128,
];
const MAJORS: [Major; 2] = [Major::K, Major::Mn];

/// Offset of `(mn, k)` in a rank-2 swizzled layout.
fn at(layout: &SwizzledLayout, mn: i64, k: i64) -> i64 {
    let plain = layout.layout.mode(0).unwrap().eval(mn).unwrap()
        + layout.layout.mode(1).unwrap().eval(k).unwrap();
    layout.swizzle.apply(plain)
}

#[test]
fn smem_atoms_are_cutes_byte_atoms_in_element_units_and_fill_one_swizzle_repeat() {
    for major in MAJORS {
        for swizzle in SWIZZLES {
            for bits in [8u32, 16, 32] {
                let atom = SmemAtom::new(major, swizzle, bits).unwrap();
                let bytes = i64::from(bits / 8);
                let (mn, k) = atom.shape();
                let w = i64::from(swizzle.width_bytes());
                // CuTe's Bits atoms: K-major (8, W*8 bits), MN-major (W*8 bits, 8).
                match major {
                    Major::K => assert_eq!((mn as i64, k as i64 * bytes), (8, w)),
                    Major::Mn => assert_eq!((mn as i64 * bytes, k as i64), (w, 8)),
                }
                let layout = atom.layout();
                let repeat = i64::from(swizzle.repeat_bytes());
                let mut seen = vec![false; repeat as usize];
                for m in 0..i64::from(mn) {
                    for kk in 0..i64::from(k) {
                        let element = at(&layout, m, kk);
                        // Element swizzle == Swizzle<B,4,3> on the byte address.
                        let plain_bytes = bytes
                            * (layout.layout.mode(0).unwrap().eval(m).unwrap()
                                + layout.layout.mode(1).unwrap().eval(kk).unwrap());
                        assert_eq!(element * bytes, swizzle.byte_swizzle().apply(plain_bytes));
                        let b = (element * bytes) as usize;
                        assert!(!seen[b]);
                        seen[b] = true;
                    }
                }
                assert_eq!(seen.iter().filter(|&&s| s).count() as i64, repeat / bytes);
            }
        }
    }
}

#[test]
fn sw128_k_major_16_bit_atom_is_cutes_layout_k_sw128_atom() {
    let atom = SmemAtom::new(Major::K, SmemSwizzle::B128, 16).unwrap();
    assert_eq!(atom.layout().to_string(), "Sw<3,3,3> o (8,64):(64,1)");
    let atom = SmemAtom::new(Major::Mn, SmemSwizzle::B64, 16).unwrap();
    assert_eq!(atom.layout().to_string(), "Sw<2,3,3> o (32,8):(1,32)");
    assert_eq!(
        SmemAtom::new(Major::K, SmemSwizzle::B32, 4),
        Err(FragError::ElementBits { bits: 4 })
    );
}

/// The `(mn, k)` sub-tile at the origin of a rank-2 layout.
fn slice(layout: &Layout, mn: i64, k: i64) -> Layout {
    composition_by_mode(
        layout,
        &[Layout::leaf(mn, 1).unwrap(), Layout::leaf(k, 1).unwrap()],
    )
    .unwrap()
}

#[test]
fn tiled_atoms_give_cutes_descriptor_fields() {
    for bits in [8u32, 16, 32] {
        let k_mma = 256 / bits; // one dense wgmma reads 32 bytes of K
        for swizzle in SWIZZLES {
            let w = swizzle.width_bytes();
            // K-major: A tile 128 x (2 atoms of K), a wgmma reads 64 x k_mma.
            let atom = SmemAtom::new(Major::K, swizzle, bits).unwrap();
            let tile = atom.tile(128, 2 * atom.shape().1).unwrap();
            let desc = GmmaDescriptor::from_layout(
                Major::K,
                swizzle,
                bits,
                &slice(&tile.layout, 64, i64::from(k_mma)),
                0,
            )
            .unwrap();
            // 8-row groups are 8 swizzle rows apart; LBO is the second 16-byte core
            // matrix along K (interleave) or unused (16).
            assert_eq!(desc.stride_byte_offset, 8 * w, "{swizzle:?} {bits}");
            let lbo = if swizzle == SmemSwizzle::Interleave {
                128 * 128 / 8
            } else {
                16
            };
            assert_eq!(desc.leading_byte_offset, lbo, "{swizzle:?} {bits}");
            assert_eq!(desc.base_offset, 0);
            // MN-major: B tile 128 (N) x 2 atoms of K.
            let atom = SmemAtom::new(Major::Mn, swizzle, bits).unwrap();
            let (amn, ak) = atom.shape();
            let tile = atom.tile(128, 2 * ak.max(k_mma)).unwrap();
            let desc = GmmaDescriptor::from_layout(
                Major::Mn,
                swizzle,
                bits,
                &slice(&tile.layout, 128, i64::from(k_mma)),
                0,
            )
            .unwrap();
            let atom_bytes = 8 * w;
            let mn_atoms = 128 / amn;
            // K groups of 8 are a column of atoms apart; a 32-bit wgmma (k8) has one
            // such group and the field is unused (packed value 8 rows of W bytes).
            let k_group = if k_mma > 8 {
                atom_bytes * mn_atoms
            } else {
                8 * w
            };
            if swizzle == SmemSwizzle::Interleave {
                // 16-byte MN chunks are whole atoms (128 B) apart.
                assert_eq!(desc.stride_byte_offset, atom_bytes, "{swizzle:?} {bits}");
                assert_eq!(desc.leading_byte_offset, k_group, "{swizzle:?} {bits}");
            } else {
                assert_eq!(desc.leading_byte_offset, atom_bytes, "{swizzle:?} {bits}");
                assert_eq!(desc.stride_byte_offset, k_group, "{swizzle:?} {bits}");
            }
        }
    }
}

/// The write-up's index function (shared/reference/001), restated.
fn writeup_kmajor_idx(row: i64, d: i64, row_stride_elems: i64) -> i64 {
    let brick_rows = row / 8 * 8 * row_stride_elems;
    let k_block = d / 16 * 128;
    let half = (d / 8) % 2 * 64;
    brick_rows + k_block + half + row % 8 * 8 + d % 8
}

#[test]
fn kmajor_interleaved_layout_equals_the_writeup_wgmma_kmajor_idx() {
    for (rows, d, stride) in [
        (64u32, 64u32, 64u32),
        (128, 128, 128),
        (64, 16, 16),
        (64, 64, 96),
    ] {
        let layout = kmajor_interleaved_layout(rows, d, stride).unwrap();
        for r in 0..i64::from(rows) {
            for c in 0..i64::from(d) {
                let offset = layout.mode(0).unwrap().eval(r).unwrap()
                    + layout.mode(1).unwrap().eval(c).unwrap();
                assert_eq!(offset, writeup_kmajor_idx(r, c, i64::from(stride)));
            }
        }
    }
}

#[test]
fn kmajor_interleaved_brick_descriptor_has_lbo_128_bytes_and_sbo_16_row_strides() {
    let layout = kmajor_interleaved_layout(64, 128, 128).unwrap();
    for k_block in 0..8 {
        let start = 2 * layout.mode(1).unwrap().eval(16 * k_block).unwrap() as u32;
        let desc = GmmaDescriptor::from_layout(
            Major::K,
            SmemSwizzle::Interleave,
            16,
            &slice(&layout, 64, 16),
            start,
        )
        .unwrap();
        assert_eq!(desc.leading_byte_offset, 128);
        assert_eq!(desc.stride_byte_offset, 16 * 128);
        assert_eq!(desc.start_address, 256 * k_block as u32);
    }
    // Plain row-major [row][d] (the write-up's first attempt) is not canonical.
    let row_major = Layout::parse("(64,16):(128,1)").unwrap();
    assert!(matches!(
        GmmaDescriptor::from_layout(Major::K, SmemSwizzle::Interleave, 16, &row_major, 0),
        Err(FragError::Descriptor { .. })
    ));
}

#[test]
fn descriptor_encoding_places_fields_at_ptx_bit_positions() {
    let desc = GmmaDescriptor {
        start_address: 0x1_2340,
        leading_byte_offset: 128,
        stride_byte_offset: 1024,
        base_offset: 5,
        swizzle: SmemSwizzle::B128,
    };
    let bits = desc.encode();
    assert_eq!(bits & 0x3fff, 0x1234);
    assert_eq!((bits >> 16) & 0x3fff, 8);
    assert_eq!((bits >> 32) & 0x3fff, 64);
    assert_eq!((bits >> 49) & 7, 5);
    assert_eq!(bits >> 62, 1);
    // A swizzled tile that does not start on its 1024-byte repeat gets a base offset.
    let atom = SmemAtom::new(Major::K, SmemSwizzle::B128, 16).unwrap();
    let tile = atom.tile(64, 64).unwrap();
    let off = GmmaDescriptor::from_layout(
        Major::K,
        SmemSwizzle::B128,
        16,
        &slice(&tile.layout, 64, 16),
        1024 + 384,
    )
    .unwrap();
    assert_eq!(off.base_offset, 3);
}
