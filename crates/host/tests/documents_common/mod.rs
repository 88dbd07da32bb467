//! Documents of given lengths, shared by the documents-grid tests (forward and backward).

use fragmask_masks::{DocumentKind, Documents};

/// Contiguous documents of `lengths` tokens from position 0.
pub fn documents(lengths: &[usize], kind: DocumentKind) -> Documents {
    let mut starts = vec![0u32];
    for &len in lengths {
        starts.push(starts.last().unwrap() + len as u32);
    }
    Documents::new(kind, starts).unwrap()
}
