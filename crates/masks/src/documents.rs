//! Contiguous documents: a mask that is causal (or full) within runs of equal document
//! ids and empty across them (docs/masks.md, "Documents").
//!
//! A [`PackedMask`](crate::PackedMask) packed from such a predicate keeps the runs'
//! starts beside its tile lists, so a forward kernel can walk each document on its own
//! grid (FlashAttention's varlen `cu_seqlens`) instead of the global tile grid. The
//! starts are batch-uniform: one list serves every batch and head of the mask.

use alloc::vec::Vec;
use core::ops::Range;

use crate::{BlockLists, MaskError, TileGrid};

/// What a query sees inside its own document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DocumentKind {
    /// Keys of its document at or before it (causal within the document).
    Causal,
    /// Every key of its document.
    Full,
}

impl DocumentKind {
    /// `causal` or `full` (the packed file's metadata value).
    pub fn name(self) -> &'static str {
        match self {
            DocumentKind::Causal => "causal",
            DocumentKind::Full => "full",
        }
    }

    /// The kind named `name` ([`Self::name`]).
    pub fn from_name(name: &str) -> Option<DocumentKind> {
        match name {
            "causal" => Some(DocumentKind::Causal),
            "full" => Some(DocumentKind::Full),
            _ => None,
        }
    }
}

/// Contiguous documents over a sequence of `seqlen` tokens (queries and keys alike):
/// document `d` is tokens `starts[d] .. starts[d + 1]`; `starts` begins at 0, ends at
/// `seqlen` and strictly increases (no empty document).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Documents {
    kind: DocumentKind,
    starts: Vec<u32>,
}

impl Documents {
    /// Checks `starts` (0 first, strictly increasing, at most `u32::MAX`) and keeps them.
    pub fn new(kind: DocumentKind, starts: Vec<u32>) -> Result<Documents, MaskError> {
        let corrupt = |detail| MaskError::Corrupt {
            what: "document starts",
            detail,
        };
        if starts.len() < 2 {
            return Err(corrupt("need at least one document (two starts)"));
        }
        if starts[0] != 0 {
            return Err(corrupt("the first document must start at token 0"));
        }
        if starts.windows(2).any(|w| w[0] >= w[1]) {
            return Err(corrupt(
                "document starts must strictly increase (no empty document)",
            ));
        }
        Ok(Documents { kind, starts })
    }

    /// The runs of equal values of `ids` (which must be non-decreasing, as packed
    /// documents are), or `None` when they are not or the length does not fit `u32`.
    pub fn from_sorted_ids(kind: DocumentKind, ids: &[i64]) -> Option<Documents> {
        let len = u32::try_from(ids.len()).ok()?;
        if ids.is_empty() || ids.windows(2).any(|w| w[0] > w[1]) {
            return None;
        }
        let mut starts = Vec::new();
        starts.push(0u32);
        for (i, w) in ids.windows(2).enumerate() {
            if w[0] != w[1] {
                starts.push(i as u32 + 1);
            }
        }
        starts.push(len);
        Documents::new(kind, starts).ok()
    }

    /// What a query sees inside its document.
    pub fn kind(&self) -> DocumentKind {
        self.kind
    }

    /// `count() + 1` starts: document `d` is `starts[d] .. starts[d + 1]`.
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    /// The number of documents.
    pub fn count(&self) -> usize {
        self.starts.len() - 1
    }

    /// The tokens of the sequence (the last start).
    pub fn seqlen(&self) -> usize {
        self.starts[self.starts.len() - 1] as usize
    }

    /// The tokens of document `d`.
    pub fn range(&self, d: usize) -> Range<usize> {
        self.starts[d] as usize..self.starts[d + 1] as usize
    }

    /// The document of token `t` (`t < seqlen`).
    pub fn document_of(&self, t: usize) -> usize {
        self.starts.partition_point(|&s| s as usize <= t) - 1
    }

    /// Whether query `q` sees key `k` (both `< seqlen`).
    pub fn is_visible(&self, q: usize, k: usize) -> bool {
        self.document_of(q) == self.document_of(k) && (self.kind == DocumentKind::Full || k <= q)
    }

    /// The tile of query rows `rows` and keys `cols` (non-empty, inside the sequence):
    /// `Some(true)` if every element is visible, `Some(false)` if none is, `None` if
    /// some are.
    pub fn tile_class(&self, rows: Range<usize>, cols: Range<usize>) -> Option<bool> {
        let (first, last) = (self.document_of(rows.start), self.document_of(rows.end - 1));
        let mut any = false;
        for d in first..=last {
            let doc = self.range(d);
            let r = rows.start.max(doc.start)..rows.end.min(doc.end);
            let c = cols.start.max(doc.start)..cols.end.min(doc.end);
            if r.is_empty() || c.is_empty() {
                continue;
            }
            // Causal: row i sees columns up to i, so some element is visible iff the
            // first column is at most the last row.
            if self.kind == DocumentKind::Full || c.start < r.end {
                any = true;
                break;
            }
        }
        if !any {
            return Some(false);
        }
        let one_doc = first == last && self.document_of(cols.start) == first && {
            let doc = self.range(first);
            cols.end <= doc.end
        };
        let all = one_doc && (self.kind == DocumentKind::Full || cols.end - 1 <= rows.start);
        if all {
            Some(true)
        } else {
            None
        }
    }

    /// Checks that `lists` over `grid` (seqlen_q = seqlen_k = [`Self::seqlen`]) hold
    /// exactly the tiles these documents make partial and full, in every row of every
    /// batch and head: a packed file's documents section must describe its own lists.
    pub fn check_lists(&self, grid: &TileGrid, lists: &BlockLists) -> Result<(), MaskError> {
        let shape = grid.shape;
        if shape.seqlen_q != self.seqlen() || shape.seqlen_k != self.seqlen() {
            return Err(MaskError::Corrupt {
                what: "packed mask documents",
                detail: "the last document start is not seqlen_q and seqlen_k",
            });
        }
        let (bm, bn) = (grid.block_m, grid.block_n);
        let [num, indices, full_num, full_indices, _] = lists.parts();
        let mut partial = Vec::new();
        let mut full = Vec::new();
        for m in 0..grid.m_blocks {
            let rows = m * bm..((m + 1) * bm).min(shape.seqlen_q);
            partial.clear();
            full.clear();
            for n in 0..grid.n_blocks {
                let cols = n * bn..((n + 1) * bn).min(shape.seqlen_k);
                // A ragged edge tile is never full (the packer's rule).
                let ragged = rows.len() < bm || cols.len() < bn;
                match self.tile_class(rows.clone(), cols) {
                    Some(true) if !ragged => full.push(n as i32),
                    Some(true) => partial.push(n as i32),
                    None => partial.push(n as i32),
                    Some(false) => {}
                }
            }
            for plane in 0..shape.batch * shape.heads {
                let row = plane * grid.m_blocks + m;
                let entries = row * grid.n_blocks..(row + 1) * grid.n_blocks;
                let listed = |count: i32, list: &[i32]| -> Option<Vec<i32>> {
                    let count = usize::try_from(count).ok()?;
                    list.get(..count).map(<[i32]>::to_vec)
                };
                let (Some(p), Some(f)) = (
                    listed(num[row], &indices[entries.clone()]),
                    listed(full_num[row], &full_indices[entries]),
                ) else {
                    return Err(MaskError::Corrupt {
                        what: "packed mask documents",
                        detail: "a tile list count is out of range",
                    });
                };
                if p != partial || f != full {
                    return Err(MaskError::Corrupt {
                        what: "packed mask documents",
                        detail: "the tile lists disagree with the document boundaries",
                    });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_sorted_ids_become_starts() {
        let d = Documents::from_sorted_ids(DocumentKind::Causal, &[3, 3, 5, 9, 9, 9]).unwrap();
        assert_eq!(d.starts(), &[0, 2, 3, 6]);
        assert_eq!((d.count(), d.seqlen(), d.document_of(2)), (3, 6, 1));
        assert!(d.is_visible(5, 3) && !d.is_visible(3, 5) && !d.is_visible(2, 1));
        assert!(Documents::from_sorted_ids(DocumentKind::Full, &[1, 0]).is_none());
        assert!(Documents::new(DocumentKind::Full, alloc::vec![0, 2, 2]).is_err());
        assert!(Documents::new(DocumentKind::Full, alloc::vec![1, 2]).is_err());
    }

    #[test]
    fn tile_class_matches_the_elements() {
        for kind in [DocumentKind::Causal, DocumentKind::Full] {
            let d = Documents::new(kind, alloc::vec![0, 5, 6, 13, 20]).unwrap();
            for r0 in 0..20 {
                for r1 in r0 + 1..=20 {
                    for c0 in 0..20 {
                        for c1 in [c0 + 1, (c0 + 4).min(20), 20] {
                            if c1 <= c0 {
                                continue;
                            }
                            let seen: Vec<bool> = (r0..r1)
                                .flat_map(|q| (c0..c1).map(move |k| (q, k)))
                                .map(|(q, k)| d.is_visible(q, k))
                                .collect();
                            let want = if seen.iter().all(|&v| v) {
                                Some(true)
                            } else if seen.iter().all(|&v| !v) {
                                Some(false)
                            } else {
                                None
                            };
                            assert_eq!(
                                d.tile_class(r0..r1, c0..c1),
                                want,
                                "{kind:?} {r0}..{r1} x {c0}..{c1}"
                            );
                        }
                    }
                }
            }
        }
    }
}
