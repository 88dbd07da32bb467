//! Documents of given lengths, shared by the documents-grid tests (forward and backward).

use fragmask_host::attention::blockmask::pack_for_kernel;
use fragmask_kernels::attention::Geometry;
use fragmask_masks::{DocumentIds, DocumentKind, Documents, PackedMask, Predicate, PredicateMask};

/// Contiguous documents of `lengths` tokens from position 0.
pub fn documents(lengths: &[usize], kind: DocumentKind) -> Documents {
    let mut starts = vec![0u32];
    for &len in lengths {
        starts.push(starts.last().unwrap() + len as u32);
    }
    Documents::new(kind, starts).unwrap()
}

/// The mask causal (or full) within contiguous documents of `lengths` tokens, packed for
/// the 128x128 tile.
pub fn packed_documents(lengths: &[usize], causal: bool) -> PackedMask {
    let ids: Vec<i64> = lengths
        .iter()
        .enumerate()
        .flat_map(|(d, &len)| std::iter::repeat_n(d as i64, len))
        .collect();
    let s = ids.len();
    let docs = Predicate::Document(DocumentIds::new(&ids));
    let predicate = if causal {
        Predicate::causal() & docs
    } else {
        docs
    };
    pack_for_kernel(
        &PredicateMask::new(s, s, predicate).unwrap(),
        &Geometry::TILE_128X128,
    )
    .unwrap()
}
