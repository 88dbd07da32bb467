//! The predicate parser and evaluator on arbitrary text: parsing returns a predicate or
//! a typed error (never a panic or a stack overflow), and a parsed predicate packs a
//! small mask whose every element equals the predicate's own answer.
//!
//! Input: byte 0 and 1 give Sq and Sk (1..=200), the rest is the predicate text.
//! `doc=NAME` resolves to fixed ids by the name's length: sorted, unsorted, per-batch
//! (2 batches), or an error.
#![no_main]

use fragmask_masks::{
    pack, parse_predicate, DocumentIds, Encoding, MaskError, MaskSource, PackOptions,
    PredicateMask, TiledAccumulator,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [a, b, rest @ ..] = data else {
        return;
    };
    let (sq, sk) = (*a as usize % 200 + 1, *b as usize % 200 + 1);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mut docs = |name: &str| -> Result<DocumentIds, MaskError> {
        // Self-attention ids serve queries and keys: only when Sq == Sk.
        let len = sq;
        match name.len() % 4 {
            0 => Ok(DocumentIds::new(
                &(0..len as i64).map(|i| i / 7).collect::<Vec<_>>(),
            )),
            1 => Ok(DocumentIds::new(
                &(0..len as i64).map(|i| (i * 5) % 3).collect::<Vec<_>>(),
            )),
            2 => {
                let q: Vec<i64> = (0..2 * sq as i64).map(|i| i % 4).collect();
                let k: Vec<i64> = (0..2 * sk as i64).map(|i| i / 9).collect();
                DocumentIds::with_batch(2, &q, &k)
            }
            _ => Err(MaskError::EmptyDimension { what: "fuzz ids" }),
        }
    };
    let Ok(predicate) = parse_predicate(text, &mut docs) else {
        return;
    };
    let Ok(mask) = PredicateMask::new(sq, sk, predicate) else {
        return;
    };
    let acc = TiledAccumulator::new(64, 64, 1, false).expect("64x64, 1 warpgroup is legal");
    let options = PackOptions {
        threads: 1,
        progress: None,
    };
    let packed = pack(&mask, &acc, Encoding::FragmentNative, &options).expect("small mask packs");
    // A sample: every 5th row and column plus both sides of every tile edge and the
    // last ones (the ragged tiles).
    let sample =
        |n: usize| (0..n).filter(move |&i| i % 5 == 0 || i % 64 == 0 || i % 64 == 63 || i == n - 1);
    let shape = mask.shape();
    for batch in 0..shape.batch {
        for q in sample(sq) {
            for k in sample(sk) {
                assert_eq!(
                    packed.get(batch, 0, q, k),
                    mask.get(batch, 0, q, k),
                    "batch {batch}, q {q}, k {k}"
                );
            }
        }
    }
});
