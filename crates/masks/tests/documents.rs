//! Documents: a predicate mask causal or full within contiguous documents keeps its
//! document boundaries through packing and the packed file; a corrupt documents section
//! is a typed error.

#[path = "../../../tests/support/proptest_ci.rs"]
mod proptest_ci;

use std::collections::HashMap;

use fragmask_masks::{
    pack, DocumentIds, DocumentKind, Documents, Encoding, MaskError, PackOptions, PackedMask,
    Predicate, PredicateMask, TiledAccumulator,
};
use proptest::prelude::*;

fn ids_of(lengths: &[usize]) -> Vec<i64> {
    lengths
        .iter()
        .enumerate()
        .flat_map(|(d, &len)| std::iter::repeat_n(d as i64 * 3, len))
        .collect()
}

fn packed(lengths: &[usize], causal: bool, block: (u32, u32, u32)) -> PackedMask {
    let ids = ids_of(lengths);
    let docs = Predicate::Document(DocumentIds::new(&ids));
    let predicate = if causal {
        Predicate::causal() & docs
    } else {
        docs
    };
    let source = PredicateMask::new(ids.len(), ids.len(), predicate).unwrap();
    let acc = TiledAccumulator::new(block.0, block.1, block.2, false).unwrap();
    pack(
        &source,
        &acc,
        Encoding::FragmentNative,
        &PackOptions::default(),
    )
    .unwrap()
}

fn starts_of(lengths: &[usize]) -> Vec<u32> {
    let mut starts = vec![0u32];
    for &len in lengths {
        starts.push(starts.last().unwrap() + len as u32);
    }
    starts
}

/// Rewrites one metadata key or the `doc_starts` tensor of a packed file (no checksums,
/// so the reader's own checks are what is tested).
fn rewrite(bytes: &[u8], key: Option<(&str, Option<&str>)>, starts: Option<Vec<i32>>) -> Vec<u8> {
    let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let mut metadata: HashMap<String, String> = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("sha256."))
        .collect();
    if let Some((k, v)) = key {
        match v {
            Some(v) => metadata.insert(k.to_string(), v.to_string()),
            None => metadata.remove(k),
        };
    }
    let mut tensors: Vec<(String, Vec<u8>, Vec<usize>, safetensors::Dtype)> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            (
                name,
                view.data().to_vec(),
                view.shape().to_vec(),
                view.dtype(),
            )
        })
        .collect();
    if let Some(starts) = starts {
        let t = tensors.iter_mut().find(|t| t.0 == "doc_starts").unwrap();
        t.1 = starts.iter().flat_map(|x| x.to_le_bytes()).collect();
        t.2 = vec![starts.len()];
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, data, shape, dtype)| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize(views, Some(metadata)).unwrap()
}

fn lengths_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![Just(1usize), 1usize..40, 60usize..300], 1..8)
}

proptest! {
    #![proptest_config(proptest_ci::config(48))]

    #[test]
    fn packed_documents_are_the_runs_of_the_ids_and_survive_the_file(
        lengths in lengths_strategy(),
        causal in any::<bool>(),
        block in prop_oneof![Just((128u32, 128u32, 2u32)), Just((64, 64, 1)), Just((128, 80, 2))],
    ) {
        let mask = packed(&lengths, causal, block);
        let docs = mask.documents().expect("a causal / full document predicate keeps its documents");
        let starts = starts_of(&lengths);
        prop_assert_eq!(docs.starts(), starts.as_slice());
        let kind = if causal { DocumentKind::Causal } else { DocumentKind::Full };
        prop_assert_eq!(docs.kind(), kind);
        let bytes = mask.to_safetensors().unwrap();
        let back = PackedMask::from_safetensors(&bytes).unwrap();
        prop_assert_eq!(back.documents(), Some(docs));
        prop_assert_eq!(&back, &mask);
    }

    #[test]
    fn documents_that_disagree_with_the_lists_are_refused(
        lengths in prop::collection::vec(1usize..300, 2..6),
        causal in any::<bool>(),
    ) {
        let mask = packed(&lengths, causal, (128, 128, 2));
        let bytes = mask.to_safetensors().unwrap();
        // Merging the first two documents makes other tiles visible.
        let mut starts: Vec<i32> = starts_of(&lengths).iter().map(|&s| s as i32).collect();
        starts.remove(1);
        let kind = DocumentKind::from_name(if causal { "causal" } else { "full" }).unwrap();
        let merged = Documents::new(kind, starts.iter().map(|&s| s as u32).collect()).unwrap();
        let differs = (0..mask.shape().seqlen_q).any(|q| (0..mask.shape().seqlen_k)
            .any(|k| merged.is_visible(q, k) != mask.get(0, 0, q, k)));
        prop_assert!(differs);
        // The starts drive the documents grid, so any disagreement with the lists or
        // the words is refused.
        let e = PackedMask::from_safetensors(&rewrite(&bytes, None, Some(starts)));
        prop_assert!(matches!(e, Err(MaskError::Corrupt { .. })), "{:?}", e.map(|_| ()));
    }
}

#[test]
fn only_document_masks_write_a_documents_section_and_all_stay_version_2() {
    // Not documents: a window, ids that are not sorted, causal & documents at Sq != Sk.
    let acc = TiledAccumulator::new(128, 128, 2, false).unwrap();
    let opts = PackOptions::default();
    let window = PredicateMask::new(300, 300, Predicate::window(Some(10), Some(0))).unwrap();
    let unsorted = PredicateMask::new(
        4,
        4,
        Predicate::Document(DocumentIds::new(&[1i64, 0, 1, 0])),
    )
    .unwrap();
    let ids = ids_of(&[3, 4]);
    let cross = PredicateMask::new(
        7,
        7,
        Predicate::Document(DocumentIds::with_batch(1, &ids, &ids).unwrap()) | Predicate::causal(),
    )
    .unwrap();
    for source in [&window, &unsorted, &cross] {
        let m = pack(source, &acc, Encoding::FragmentNative, &opts).unwrap();
        assert!(m.documents().is_none());
        let (_, meta) =
            safetensors::SafeTensors::read_metadata(&m.to_safetensors().unwrap()).unwrap();
        let meta = meta.metadata().clone().unwrap();
        assert_eq!(meta["format_version"], "2");
        assert!(!meta.contains_key("documents"));
    }
    let with = packed(&[100, 200], true, (128, 128, 2));
    let (_, meta) =
        safetensors::SafeTensors::read_metadata(&with.to_safetensors().unwrap()).unwrap();
    let meta = meta.metadata().clone().unwrap();
    assert_eq!(
        (meta["format_version"].as_str(), meta["documents"].as_str()),
        ("2", "causal")
    );
}

#[test]
fn a_corrupt_documents_section_is_a_typed_error() {
    let mask = packed(&[100, 1, 299], true, (128, 128, 2));
    let bytes = mask.to_safetensors().unwrap();
    let corrupt = |b: Vec<u8>| match PackedMask::from_safetensors(&b) {
        Err(
            e @ (MaskError::Corrupt { .. }
            | MaskError::Missing { .. }
            | MaskError::BadRank { .. }
            | MaskError::WrongDtype { .. }),
        ) => e.to_string(),
        other => panic!("expected a typed error, got {:?}", other.map(|_| ())),
    };
    for (key, why) in [
        (Some(("documents", Some("sideways"))), "causal or full"),
        (Some(("format_version", Some("1"))), "version 2"),
        (Some(("documents", None)), "names no documents"),
    ] {
        let e = corrupt(rewrite(&bytes, key, None));
        assert!(e.contains(why), "{e}");
    }
    for (starts, why) in [
        (vec![0, 100, 101, 400 - 1, 400], "disagree"),
        (vec![0, 99, 101, 400], "disagree"),
        (vec![0, 101, 100, 400], "strictly increase"),
        (vec![1, 100, 101, 400], "token 0"),
        (vec![0, -5, 101, 400], "negative"),
        (vec![0], "at least one"),
        (vec![0, 100, 101, 399], "seqlen"),
    ] {
        let e = corrupt(rewrite(&bytes, None, Some(starts)));
        assert!(e.contains(why), "{e}");
    }
    // The untouched file reads back with its documents.
    let back = PackedMask::from_safetensors(&rewrite(&bytes, None, None)).unwrap();
    assert_eq!(back.documents(), mask.documents());
}

#[test]
fn all_terms_of_the_and_do_not_hide_the_documents() {
    let ids = ids_of(&[5, 7, 1]);
    let acc = TiledAccumulator::new(64, 64, 1, false).unwrap();
    for (predicate, kind) in [
        (
            Predicate::All & Predicate::Document(DocumentIds::new(&ids)),
            DocumentKind::Full,
        ),
        (
            Predicate::Document(DocumentIds::new(&ids)) & Predicate::All & Predicate::causal(),
            DocumentKind::Causal,
        ),
    ] {
        let source = PredicateMask::new(13, 13, predicate).unwrap();
        let m = pack(
            &source,
            &acc,
            Encoding::FragmentNative,
            &PackOptions::default(),
        )
        .unwrap();
        assert_eq!(
            m.documents().map(|d| (d.kind(), d.starts().to_vec())),
            Some((kind, vec![0, 5, 12, 13]))
        );
    }
}
