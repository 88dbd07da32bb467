//! Every source agrees with its dense equivalent (built here from the definitions), and
//! bad input is a typed error.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

mod common;

use common::{acc, config, Rng};
use fragmask_masks::{
    pack, parse_predicate, Alignment, BlockSparseMask, BlockSparseOptions, DenseMask, DocumentIds,
    Encoding, MaskError, MaskShape, MaskSource, PackOptions, Predicate, PredicateMask, TopKMask,
    MAX_PREDICATE_DEPTH, MAX_PREDICATE_NESTING,
};
use proptest::prelude::*;

/// Checks `source` element by element against `dense` (`[B, H, Sq, Sk]`, 0/1), then
/// packs both with config `i` and `encoding` and requires identical results.
fn assert_agrees_with_dense(source: &dyn MaskSource, dense: &[u8], i: usize, encoding: Encoding) {
    let s = source.shape();
    let dims = [s.batch, s.heads, s.seqlen_q, s.seqlen_k];
    let reference = DenseMask::new(dense, &dims).unwrap();
    for b in 0..s.batch {
        for h in 0..s.heads {
            for q in 0..s.seqlen_q {
                let mut row = vec![0u64; s.seqlen_k.div_ceil(64)];
                source.row_bits(b, h, q, 0, s.seqlen_k, &mut row);
                for k in 0..s.seqlen_k {
                    let want = reference.get(b, h, q, k);
                    assert_eq!(
                        (row[k / 64] >> (k % 64)) & 1 == 1,
                        want,
                        "row_bits ({b}, {h}, {q}, {k})"
                    );
                }
                // A segment that starts mid-row.
                let k0 = s.seqlen_k / 3;
                let mut seg = vec![0u64; (s.seqlen_k - k0).div_ceil(64)];
                source.row_bits(b, h, q, k0, s.seqlen_k - k0, &mut seg);
                for k in k0..s.seqlen_k {
                    assert_eq!(
                        (seg[(k - k0) / 64] >> ((k - k0) % 64)) & 1 == 1,
                        reference.get(b, h, q, k)
                    );
                }
            }
        }
    }
    let a = acc(i);
    let options = PackOptions::default();
    let from_source = pack(source, &a, encoding, &options).unwrap();
    let from_dense = pack(&reference, &a, encoding, &options).unwrap();
    assert_eq!(from_source, from_dense);
}

fn shape() -> impl Strategy<Value = (usize, usize, usize, usize)> {
    (1usize..=2, 1usize..=2, 1usize..=300, 1usize..=600)
}

proptest! {
    #![proptest_config(proptest_ci::config(24))]

    #[test]
    fn top_k_lists_agree_with_their_dense_mask((b, h, sq, sk) in shape(), k in 0usize..48, seed in any::<u64>(), i in config(), e in 0usize..3) {
        let mut rng = Rng(seed);
        let shape = MaskShape::new(b, h, sq, sk).unwrap();
        let rows = b * h * sq;
        let mut dense = vec![0u8; rows * sk];
        let mut fixed = Vec::with_capacity(rows * k);
        let (mut offsets, mut csr) = (vec![0i64], Vec::new());
        for row in 0..rows {
            let mut keys: Vec<i64> = Vec::new();
            for _ in 0..k {
                let key = rng.below(sk as u64) as i64;
                if !keys.contains(&key) && rng.below(5) != 0 {
                    keys.push(key);
                }
            }
            for &key in &keys {
                dense[row * sk + key as usize] = 1;
            }
            let mut padded = keys.clone();
            padded.resize(k, -1);
            // Unsorted, padding anywhere.
            for j in (1..padded.len()).rev() {
                padded.swap(j, rng.below(j as u64 + 1) as usize);
            }
            fixed.extend(padded);
            keys.sort();
            csr.extend(keys);
            offsets.push(csr.len() as i64);
        }
        let from_fixed = TopKMask::from_fixed_k(shape, k, &fixed).unwrap();
        let from_csr = TopKMask::from_csr(shape, &offsets, &csr).unwrap();
        prop_assert_eq!(&from_fixed, &from_csr);
        prop_assert_eq!(from_csr.nnz(), csr.len());
        assert_agrees_with_dense(&from_csr, &dense, i, Encoding::ALL[e]);
    }

    #[test]
    fn block_lists_agree_with_their_dense_mask(
        heads in 1usize..=2, q_blocks in 1usize..=6, kv_blocks in 1usize..=8, max_kv in 0usize..=8,
        small_blocks in any::<bool>(), seed in any::<u64>(), i in config(), e in 0usize..3,
    ) {
        let mut rng = Rng(seed);
        let bs = if small_blocks { 16 } else { 64 };
        let lists = heads * q_blocks;
        let mut index = vec![-7i32; lists * max_kv];
        let mut num = vec![0i32; lists];
        for list in 0..lists {
            let mut chosen: Vec<i32> = Vec::new();
            for _ in 0..max_kv {
                let kb = rng.below(kv_blocks as u64) as i32;
                if !chosen.contains(&kb) {
                    chosen.push(kb);
                }
            }
            num[list] = chosen.len() as i32;
            index[list * max_kv..list * max_kv + chosen.len()].copy_from_slice(&chosen);
        }
        let sizes: Vec<i64> = (0..kv_blocks).map(|_| rng.below(bs as u64 + 1) as i64).collect();
        let sq = q_blocks * bs - rng.below(bs as u64) as usize;
        let sk = kv_blocks * bs - rng.below(bs as u64) as usize;
        let options = BlockSparseOptions { block_size: bs, seqlen_q: Some(sq), seqlen_k: Some(sk) };
        let source = BlockSparseMask::new(&[heads, q_blocks, max_kv], &index, &[heads, q_blocks], &num, Some(&sizes[..]), options).unwrap();
        let mut dense = vec![0u8; heads * sq * sk];
        for h in 0..heads {
            for q in 0..sq {
                let list = h * q_blocks + q / bs;
                for &kb in &index[list * max_kv..list * max_kv + num[list] as usize] {
                    for t in 0..sizes[kb as usize] as usize {
                        let k = kb as usize * bs + t;
                        if k < sk {
                            dense[(h * sq + q) * sk + k] = 1;
                        }
                    }
                }
            }
        }
        assert_agrees_with_dense(&source, &dense, i, Encoding::ALL[e]);
    }

    #[test]
    fn predicates_agree_with_their_dense_mask(
        sq in 1usize..=400, sk in 1usize..=400, seed in any::<u64>(), i in config(), e in 0usize..3,
    ) {
        let mut rng = Rng(seed);
        let predicate = random_predicate(&mut rng, sk, 3);
        let source = PredicateMask::new(sq, sk, predicate.clone()).unwrap();
        let batch = source.shape().batch;
        let mut dense = vec![0u8; batch * sq * sk];
        for b in 0..batch {
            for q in 0..sq {
                for k in 0..sk {
                    dense[(b * sq + q) * sk + k] = eval(&predicate, q, k, sq, sk) as u8;
                }
            }
        }
        assert_agrees_with_dense(&source, &dense, i, Encoding::ALL[e]);
    }
}

/// The predicates' definitions, element by element.
fn eval(p: &Predicate, q: usize, k: usize, sq: usize, sk: usize) -> bool {
    let (q, k) = (q as i64, k as i64);
    let diag = |align: &Alignment| match align {
        Alignment::TopLeft => q,
        Alignment::BottomRight => q + sk as i64 - sq as i64,
    };
    match p {
        Predicate::All => true,
        Predicate::Nothing => false,
        Predicate::Causal(a) => k <= diag(a),
        Predicate::Window { left, right, align } => {
            let d = diag(align);
            left.is_none_or(|l| k >= d - l as i64) && right.is_none_or(|r| k <= d + r as i64)
        }
        Predicate::PrefixLm { prefix, align } => k < *prefix as i64 || k <= diag(align),
        Predicate::Document(_) => unreachable!("documents are evaluated through DOCS"),
        Predicate::And(parts) => parts
            .iter()
            .all(|x| eval(x, q as usize, k as usize, sq, sk)),
        Predicate::Or(parts) => parts
            .iter()
            .any(|x| eval(x, q as usize, k as usize, sq, sk)),
        Predicate::Not(x) => !eval(x, q as usize, k as usize, sq, sk),
    }
}

fn random_predicate(rng: &mut Rng, sk: usize, depth: u32) -> Predicate {
    let align = if rng.below(2) == 0 {
        Alignment::TopLeft
    } else {
        Alignment::BottomRight
    };
    let count = |rng: &mut Rng| {
        if rng.below(4) == 0 {
            None
        } else {
            Some(rng.below(200) as usize)
        }
    };
    match rng.below(if depth == 0 { 5 } else { 8 }) {
        0 => Predicate::Causal(align),
        1 => Predicate::Window {
            left: count(rng),
            right: count(rng),
            align,
        },
        2 => Predicate::PrefixLm {
            prefix: rng.below(sk as u64 + 10) as usize,
            align,
        },
        3 => {
            if rng.below(2) == 0 {
                Predicate::All
            } else {
                Predicate::Nothing
            }
        }
        4 => Predicate::Causal(align),
        5 => random_predicate(rng, sk, depth - 1) & random_predicate(rng, sk, depth - 1),
        6 => random_predicate(rng, sk, depth - 1) | random_predicate(rng, sk, depth - 1),
        _ => !random_predicate(rng, sk, depth - 1),
    }
}

proptest! {
    #![proptest_config(proptest_ci::config(16))]

    #[test]
    fn document_masks_agree_with_their_dense_mask(
        batch in 1usize..=2, sq in 1usize..=300, sk in 1usize..=300, sorted in any::<bool>(),
        docs in 1i64..6, causal in any::<bool>(), seed in any::<u64>(), i in config(), e in 0usize..3,
    ) {
        let mut rng = Rng(seed);
        let ids = |len: usize, rng: &mut Rng| -> Vec<i64> {
            let mut v: Vec<i64> = (0..batch * len).map(|_| rng.below(docs as u64) as i64).collect();
            if sorted {
                for chunk in v.chunks_mut(len) {
                    chunk.sort();
                }
            }
            v
        };
        let (q_ids, k_ids) = (ids(sq, &mut rng), ids(sk, &mut rng));
        let doc = Predicate::Document(DocumentIds::with_batch(batch, &q_ids, &k_ids).unwrap());
        let predicate = if causal { doc & Predicate::Causal(Alignment::TopLeft) } else { doc };
        let source = PredicateMask::new(sq, sk, predicate).unwrap();
        prop_assert_eq!(source.shape().batch, batch);
        let mut dense = vec![0u8; batch * sq * sk];
        for b in 0..batch {
            for q in 0..sq {
                for k in 0..sk {
                    let same = q_ids[b * sq + q] == k_ids[b * sk + k];
                    dense[(b * sq + q) * sk + k] = (same && (!causal || k <= q)) as u8;
                }
            }
        }
        assert_agrees_with_dense(&source, &dense, i, Encoding::ALL[e]);
    }
}

#[test]
fn causal_predicate_packs_without_reading_full_or_empty_tiles() {
    // 16k x 16k causal: 128 row blocks of 128 tiles; only the diagonal is partial.
    let m = PredicateMask::new(16384, 16384, Predicate::causal()).unwrap();
    let packed = pack(
        &m,
        &acc(0),
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap();
    let s = packed.stats();
    assert_eq!(
        (s.partial, s.full, s.empty),
        (128, 128 * 127 / 2, 128 * 127 / 2)
    );
}

#[test]
fn bottom_right_causal_shifts_the_diagonal_by_sk_minus_sq() {
    let br = PredicateMask::new(2, 5, Predicate::causal()).unwrap();
    let tl = PredicateMask::new(2, 5, Predicate::Causal(Alignment::TopLeft)).unwrap();
    assert!(br.get(0, 0, 0, 3) && !br.get(0, 0, 0, 4) && br.get(0, 0, 1, 4));
    assert!(tl.get(0, 0, 0, 0) && !tl.get(0, 0, 0, 1));
}

#[test]
fn predicate_text_parses_to_the_same_predicate() {
    let mut docs = |name: &str| -> Result<DocumentIds, MaskError> {
        assert_eq!(name, "ids.npy");
        Ok(DocumentIds::new(&[0i64, 0, 1]))
    };
    let p = parse_predicate(
        "(causal@tl | prefix=4) & !window=inf:2@br, doc=ids.npy",
        &mut docs,
    )
    .unwrap();
    let expected = ((Predicate::Causal(Alignment::TopLeft) | Predicate::prefix_lm(4))
        & !Predicate::window(None, Some(2)))
        & Predicate::Document(DocumentIds::new(&[0i64, 0, 1]));
    assert_eq!(p, expected);
    for bad in [
        "",
        "causal=3",
        "window=3",
        "window=a:b",
        "causal &",
        "(causal",
        "sideways",
        "causal@up",
    ] {
        assert!(
            matches!(
                parse_predicate(bad, &mut docs),
                Err(MaskError::Syntax { .. })
            ),
            "{bad}"
        );
    }
}

// ---- Bad input is a typed error. ----

fn one_row(sk: usize) -> MaskShape {
    MaskShape::new(1, 1, 1, sk).unwrap()
}

#[test]
fn csr_rejects_unsorted_indices_as_unsorted() {
    let err = TopKMask::from_csr(one_row(10), &[0i64, 3], &[1i64, 5, 4]).unwrap_err();
    assert_eq!(
        err,
        MaskError::Unsorted {
            what: "CSR top-k indices",
            row: 0,
            previous: 5,
            index: 4
        }
    );
    assert!(err.to_string().contains("sorted strictly ascending"));
}

#[test]
fn csr_rejects_duplicate_indices_as_duplicate() {
    let err = TopKMask::from_csr(one_row(10), &[0i32, 3], &[1i32, 4, 4]).unwrap_err();
    assert!(matches!(err, MaskError::DuplicateIndex { index: 4, .. }));
}

#[test]
fn csr_rejects_out_of_range_and_padding() {
    let err = TopKMask::from_csr(one_row(10), &[0i32, 2], &[1i32, 10]).unwrap_err();
    assert!(matches!(
        err,
        MaskError::IndexOutOfRange {
            index: 10,
            bound: 10,
            ..
        }
    ));
    let err = TopKMask::from_csr(one_row(10), &[0i32, 2], &[-1i32, 3]).unwrap_err();
    assert!(matches!(err, MaskError::IndexOutOfRange { index: -1, .. }));
}

#[test]
fn csr_rejects_bad_offsets() {
    let shape = MaskShape::new(1, 1, 2, 10).unwrap();
    assert!(matches!(
        TopKMask::from_csr(shape, &[0i32, 2], &[1i32, 2]),
        Err(MaskError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        TopKMask::from_csr(shape, &[1i32, 1, 2], &[1i32, 2]),
        Err(MaskError::BadOffsets { position: 0, .. })
    ));
    assert!(matches!(
        TopKMask::from_csr(shape, &[0i32, 2, 1], &[1i32, 2]),
        Err(MaskError::BadOffsets { position: 2, .. })
    ));
    assert!(matches!(
        TopKMask::from_csr(shape, &[0i32, 1, 1], &[1i32, 2]),
        Err(MaskError::BadOffsets { .. })
    ));
}

#[test]
fn fixed_k_accepts_minus_one_padding_in_any_order() {
    let t = TopKMask::from_fixed_k(
        MaskShape::new(1, 1, 2, 10).unwrap(),
        3,
        &[9i64, -1, 2, -1, -1, -1],
    )
    .unwrap();
    assert_eq!(t.keys(0, 0, 0), &[2, 9]);
    assert_eq!(t.keys(0, 0, 1), &[] as &[u32]);
}

#[test]
fn fixed_k_rejects_duplicates_and_out_of_range() {
    let s = one_row(10);
    assert!(matches!(
        TopKMask::from_fixed_k(s, 3, &[4i32, 1, 4]),
        Err(MaskError::DuplicateIndex { index: 4, .. })
    ));
    assert!(matches!(
        TopKMask::from_fixed_k(s, 2, &[-2i32, 1]),
        Err(MaskError::IndexOutOfRange { index: -2, .. })
    ));
    assert!(matches!(
        TopKMask::from_fixed_k(s, 2, &[10u16, 1]),
        Err(MaskError::IndexOutOfRange { index: 10, .. })
    ));
    assert!(matches!(
        TopKMask::from_fixed_k(s, 2, &[1i32]),
        Err(MaskError::ShapeMismatch { .. })
    ));
    assert!(matches!(
        TopKMask::from_fixed_k_dims(&[5], 10, &[1i32; 5]),
        Err(MaskError::BadRank { .. })
    ));
}

#[test]
fn dense_rejects_shape_mismatch_and_bad_rank() {
    assert!(matches!(
        DenseMask::new(&[1; 5], &[2, 3]),
        Err(MaskError::ShapeMismatch {
            expected: 6,
            found: 5,
            ..
        })
    ));
    assert!(matches!(
        DenseMask::new(&[1; 6], &[6]),
        Err(MaskError::BadRank { rank: 1, .. })
    ));
    assert!(matches!(
        DenseMask::new(&[], &[0, 3]),
        Err(MaskError::EmptyDimension { .. })
    ));
}

#[test]
fn block_lists_reject_bad_entries() {
    let o = BlockSparseOptions::default();
    let sizes = Some(&[64i32, 64][..]);
    let idx =
        |index: &[i32], num: &[i32]| BlockSparseMask::new(&[1, 2], index, &[1], num, sizes, o);
    assert!(idx(&[0, 1], &[2]).is_ok());
    assert!(matches!(
        idx(&[0, 2], &[2]),
        Err(MaskError::IndexOutOfRange {
            index: 2,
            bound: 2,
            ..
        })
    ));
    assert!(matches!(
        idx(&[1, 1], &[2]),
        Err(MaskError::DuplicateIndex { index: 1, .. })
    ));
    assert!(matches!(
        idx(&[0, 1], &[3]),
        Err(MaskError::IndexOutOfRange { index: 3, .. })
    ));
    // Entries past the count are ignored.
    assert!(idx(&[0, 99], &[1]).is_ok());
    let bad_size = BlockSparseMask::new(&[1, 1], &[0i32], &[1], &[1i32], Some(&[65i32][..]), o);
    assert!(matches!(
        bad_size,
        Err(MaskError::IndexOutOfRange { index: 65, .. })
    ));
    let bad_num_shape = BlockSparseMask::new(&[2, 1], &[0i32, 0], &[3], &[1i32; 3], sizes, o);
    assert!(matches!(
        bad_num_shape,
        Err(MaskError::ShapeMismatch { .. })
    ));
    let wrong_sq = BlockSparseOptions {
        seqlen_q: Some(65),
        ..o
    };
    let e = BlockSparseMask::new(&[1, 1], &[0i32], &[1], &[1i32], sizes, wrong_sq);
    assert!(matches!(
        e,
        Err(MaskError::ExtentOutOfRange {
            what: "seqlen_q",
            ..
        })
    ));
    let no_sizes = BlockSparseMask::new::<i32, i32, i32>(&[1, 1], &[0], &[1], &[1], None, o);
    assert!(matches!(no_sizes, Err(MaskError::Missing { .. })));
}

#[test]
fn document_ids_must_match_the_sequence_lengths() {
    let p = Predicate::Document(DocumentIds::new(&[0i32, 0, 1]));
    assert!(matches!(
        PredicateMask::new(4, 4, p),
        Err(MaskError::ShapeMismatch {
            expected: 4,
            found: 3,
            ..
        })
    ));
}

#[test]
fn top_k_strip_counts_are_exact_when_sparse_and_declined_when_dense() {
    let (sq, sk, block_n): (usize, usize, usize) = (8, 1000, 96);
    let n_blocks = sk.div_ceil(block_n);
    // Sparse: 3 keys per row (16 words of bits per row): counted, exactly.
    let sparse: Vec<i64> = (0..sq)
        .flat_map(|q| [q as i64, 95 + q as i64, 999 - q as i64])
        .collect();
    let topk = TopKMask::from_fixed_k(MaskShape::new(1, 1, sq, sk).unwrap(), 3, &sparse).unwrap();
    let mut counts = vec![0u64; n_blocks];
    assert!(topk.strip_counts(0, 0, 2..6, block_n, &mut counts));
    let mut expected = vec![0u64; n_blocks];
    for q in 2..6 {
        for k in 0..sk {
            expected[k / block_n] += topk.get(0, 0, q, k) as u64;
        }
    }
    assert_eq!(counts, expected);
    assert_eq!(counts.iter().sum::<u64>(), 12);
    // Dense: 500 keys per row (> 2 per word): declined, `counts` untouched.
    let dense: Vec<i64> = (0..sq).flat_map(|_| (0..500).map(|k| 2 * k)).collect();
    let topk = TopKMask::from_fixed_k(MaskShape::new(1, 1, sq, sk).unwrap(), 500, &dense).unwrap();
    let mut counts = vec![7u64; n_blocks];
    assert!(!topk.strip_counts(0, 0, 0..sq, block_n, &mut counts));
    assert!(counts.iter().all(|&c| c == 7));
}

// ---- Recursion is bounded (issue 10, class 3). ----

#[test]
fn parser_refuses_parentheses_past_the_nesting_limit_by_name() {
    let mut docs = |_: &str| -> Result<DocumentIds, MaskError> { unreachable!() };
    let nested = |n: usize| format!("{}causal{}", "(".repeat(n), ")".repeat(n));
    let p = parse_predicate(&nested(MAX_PREDICATE_NESTING), &mut docs).unwrap();
    assert_eq!(p, Predicate::causal());
    for n in [MAX_PREDICATE_NESTING + 1, 50_000] {
        let err = parse_predicate(&nested(n), &mut docs).unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(err, MaskError::Syntax { .. })
                && message.contains(&format!("limit of {MAX_PREDICATE_NESTING}")),
            "{message}"
        );
        assert!(message.len() < 300, "quotes the whole text: {message}");
    }
}

#[test]
fn long_chains_and_not_runs_parse_to_shallow_trees() {
    let mut docs = |_: &str| -> Result<DocumentIds, MaskError> { unreachable!() };
    let chain = vec!["causal"; 8000].join(",");
    let p = parse_predicate(&chain, &mut docs).unwrap();
    assert!(matches!(&p, Predicate::And(parts) if parts.len() == 8000));
    assert_eq!(p.depth(), 2);
    let ors = vec!["(causal|all)"; 3000].join("|");
    assert_eq!(parse_predicate(&ors, &mut docs).unwrap().depth(), 2);
    let even = format!("{}causal", "!".repeat(10_000));
    assert_eq!(
        parse_predicate(&even, &mut docs).unwrap(),
        Predicate::causal()
    );
    let odd = format!("{}causal", "!".repeat(10_001));
    assert_eq!(
        parse_predicate(&odd, &mut docs).unwrap(),
        !Predicate::causal()
    );
    // An 8000-atom chain evaluates (flat: no 8000-deep recursion).
    let mask = PredicateMask::new(200, 200, p).unwrap();
    assert!(mask.get(0, 0, 199, 199) && !mask.get(0, 0, 0, 1));
}

#[test]
fn predicate_mask_refuses_trees_deeper_than_the_limit() {
    let mut p = Predicate::causal();
    for i in 0..MAX_PREDICATE_DEPTH {
        p = if i % 2 == 0 {
            p & Predicate::All
        } else {
            p | Predicate::Nothing
        };
    }
    assert_eq!(p.depth(), MAX_PREDICATE_DEPTH + 1);
    let err = PredicateMask::new(8, 8, p).unwrap_err();
    assert!(
        matches!(err, MaskError::TooLarge { limit, .. } if limit == MAX_PREDICATE_DEPTH as u64),
        "{err}"
    );
}

#[test]
fn document_callback_errors_name_the_atom() {
    let mut docs = |_: &str| -> Result<DocumentIds, MaskError> {
        Err(MaskError::EmptyDimension { what: "ids" })
    };
    let err = parse_predicate("causal,doc=ids.npy", &mut docs).unwrap_err();
    assert!(
        matches!(&err, MaskError::Document { name, .. } if name == "ids.npy")
            && err.to_string().starts_with("doc=ids.npy: "),
        "{err}"
    );
}

const TOKENS: [&str; 10] = [
    "causal",
    "all",
    "window=2:1",
    "!",
    "(",
    ")",
    ",",
    "|",
    "&",
    "prefix=3@tl",
];

proptest! {
    #[test]
    fn every_parsed_predicate_is_within_the_evaluator_depth_limit(
        tokens in proptest::collection::vec(0usize..TOKENS.len(), 1..400),
        opens in 0usize..100,
    ) {
        let mut docs = |_: &str| -> Result<DocumentIds, MaskError> { unreachable!() };
        let text = "(".repeat(opens)
            + &tokens.iter().map(|&t| TOKENS[t]).collect::<String>()
            + &")".repeat(opens);
        if let Ok(p) = parse_predicate(&text, &mut docs) {
            prop_assert!(p.depth() <= MAX_PREDICATE_DEPTH, "{}", p.depth());
            prop_assert!(PredicateMask::new(4, 4, p).is_ok());
        }
    }
}
