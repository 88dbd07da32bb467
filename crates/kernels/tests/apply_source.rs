//! Structural checks of the generated mask-apply and packer sources (no compiler
//! needed; crates/check/tests/apply_sass.rs compiles them, and the checking crate's emulator
//! executes the same programs).

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use fragmask_gmma_frag::TiledAccumulator;
use fragmask_kernels::apply::kernels::{
    all_cost_variants, bench_source, check_source, cost_source, BenchVariant,
};
use fragmask_kernels::apply::{
    accumulator, emit_functions, header, parse_block, parse_encoding, ApplyProgram, CodegenError,
    HeaderOptions, Space,
};
use fragmask_kernels::packer::PackerKernels;
use fragmask_masks::Encoding;
use proptest::prelude::*;

fn assert_header_free_and_balanced(src: &str) {
    assert!(
        !src.lines().any(|l| l.trim_start().starts_with("#include")),
        "generated code must not include headers"
    );
    assert_eq!(
        src.matches('{').count(),
        src.matches('}').count(),
        "unbalanced braces"
    );
}

/// Every emitted index line names the layout it came from: each `const unsigned x = ...;`
/// carries a comment naming a layout or a word layout, and each masked value is preceded
/// by a comment naming its coordinate in the value mode.
fn assert_index_math_is_commented(src: &str) {
    let lines: Vec<&str> = src.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("const unsigned ")
            && t.contains(" = ")
            && !t.starts_with("const unsigned word =")
            && !t.starts_with("const unsigned w =")
            && !t.starts_with("const unsigned col =")
        {
            let comment = t.split("//").nth(1).unwrap_or("");
            assert!(
                comment.contains("layout") || comment.contains("words ("),
                "index expression without a layout comment: {t}"
            );
        }
        if t.starts_with("acc[") && t.contains("words[") {
            assert!(
                lines[i - 1].trim_start().starts_with("// value "),
                "masked value without its value-mode comment: {t}"
            );
        }
        if t.starts_with("const unsigned col =") {
            assert!(t.contains("// tile column"), "{t}");
        }
    }
}

const CONFIGS: [(u32, u32, u32, bool); 7] = [
    (128, 128, 2, false),
    (128, 128, 1, false),
    (192, 128, 3, false),
    (128, 64, 2, false),
    (64, 256, 1, false),
    (128, 176, 2, false),
    (128, 128, 2, true),
];

#[test]
fn every_header_is_header_free_and_every_index_names_its_layout() {
    for (m, n, w, swap) in CONFIGS {
        let acc = TiledAccumulator::new(m, n, w, swap).unwrap();
        for e in Encoding::ALL {
            let h = header(&acc, e, &HeaderOptions::default()).unwrap();
            assert_header_free_and_balanced(&h);
            assert_index_math_is_commented(&h);
            assert!(h.contains("#pragma once"));
            assert!(h.contains("Usage in a FlashAttention-3-style consumer"));
        }
        for src in [
            cost_source(&acc, &all_cost_variants()).unwrap(),
            check_source(&acc).unwrap(),
        ] {
            assert_header_free_and_balanced(&src);
        }
        if !swap {
            assert_header_free_and_balanced(&PackerKernels::new(&acc).unwrap().source());
        }
    }
}

#[test]
fn thread_terms_are_printed_from_the_tv_layout_leaves() {
    let acc = accumulator(128, 128, 2, false).unwrap();
    let text = emit_functions(&ApplyProgram::new(&acc, Encoding::RowMajor).unwrap());
    // ((4,8,4),2):((256,1,16),64): leaf 8:1 and 4:16 and 2:64 move the row, 4:256 the column.
    assert!(text.contains(
        "const unsigned row_t = (((thread / 4u) % 8u) + (((thread / 32u) % 4u) * 16u)) + ((thread / 128u) * 64u); \
         // tile row of the thread's value 0, from the tv_layout thread mode ((4,8,4),2):((256,1,16),64)"
    ));
    assert!(text.contains("const unsigned col_t = (thread % 4u) * 2u;"));
}

#[test]
fn fa3_tile_programs_load_what_the_encodings_promise() {
    let acc = accumulator(128, 128, 2, false).unwrap();
    let fnat = ApplyProgram::new(&acc, Encoding::FragmentNative).unwrap();
    assert_eq!(fnat.space(), Space::Global);
    assert_eq!((fnat.loads_per_thread(), fnat.loaded_words()), (1, 2));
    assert_eq!(fnat.fetches()[0].vector, 2, "one 8-byte load");
    let quad = ApplyProgram::new(&acc, Encoding::QuadLane).unwrap();
    assert_eq!(quad.space(), Space::Shared);
    assert_eq!(
        (quad.loads_per_thread(), quad.loaded_words()),
        (2, 2),
        "one word per row"
    );
    let rows = ApplyProgram::new(&acc, Encoding::RowMajor).unwrap();
    assert_eq!(
        (rows.loads_per_thread(), rows.loaded_words()),
        (2, 8),
        "a whole row per row"
    );
    assert!(
        rows.fetches().iter().all(|f| f.vector == 4),
        "uint4 row loads, as FA3"
    );
    // Each warpgroup reads exactly its own half of the staged words.
    assert_eq!(quad.group_words(128), Some(256));
    assert_eq!(rows.group_words(128), Some(256));
    for p in [&fnat, &quad, &rows] {
        assert_eq!(p.tests().len(), 64);
        assert!(p
            .tests()
            .iter()
            .enumerate()
            .all(|(v, t)| t.value == v as u32));
    }
}

#[test]
fn bad_configurations_are_typed_errors() {
    assert_eq!(
        parse_block("128"),
        Err(CodegenError::BadBlock("128".into()))
    );
    assert_eq!(
        parse_block("128xq"),
        Err(CodegenError::BadBlock("128xq".into()))
    );
    assert!(matches!(
        parse_encoding("bitmap"),
        Err(CodegenError::BadEncoding(_))
    ));
    assert_eq!(parse_encoding("quad_lane"), Ok(Encoding::QuadLane));
    assert!(matches!(
        accumulator(100, 128, 2, false),
        Err(CodegenError::Config(_))
    ));
    assert!(matches!(
        accumulator(128, 128, 4, false),
        Err(CodegenError::Config(_))
    ));
    assert!(matches!(
        accumulator(128, 12, 2, false),
        Err(CodegenError::Config(_))
    ));
    let swapped = accumulator(128, 128, 2, true).unwrap();
    assert!(matches!(
        bench_source(&swapped, &BenchVariant::all()),
        Err(CodegenError::Unsupported(_))
    ));
    let msg = accumulator(100, 128, 2, false).unwrap_err().to_string();
    assert!(msg.contains("block_m = 100"), "{msg}");
}

proptest! {
    #![proptest_config(proptest_ci::config(64))]
    /// For any legal non-SwapAB tiling, every encoding's program builds and every load
    /// stays inside the tile with its vector alignment (checked on all threads).
    #[test]
    fn programs_build_and_stay_in_the_tile_for_legal_tilings(
        w in 1u32..=3, mma_m in 1u32..=2, n8 in 1u32..=32, swap in any::<bool>()
    ) {
        let (m, n) = if swap { (8 * n8, 64 * w * mma_m) } else { (64 * w * mma_m, 8 * n8) };
        let acc = TiledAccumulator::new(m, n, w, swap).unwrap();
        for e in Encoding::ALL {
            let p = ApplyProgram::new(&acc, e).unwrap();
            let words = p.words_per_tile() as u32;
            for thread in 0..acc.threads() {
                let lets = fragmask_kernels::emit::eval_lets(p.lets(), thread).unwrap();
                for f in p.fetches() {
                    let o = f.offset.eval(thread, &lets).unwrap();
                    prop_assert!(o + f.words <= words, "{m}x{n} {}: thread {thread}", e.name());
                    prop_assert_eq!(o % f.vector, 0);
                }
            }
        }
    }
}
