//! The documents grid's work items (docs/architecture.md §3, "The documents grid"): one
//! CTA per (document, row block of the document), the kernel's `doc_items` table.
//!
//! Inside a document of `len` tokens the forward runs the window walk of a sequence of
//! `len` queries and keys (`family::schedule::row_block::DOCUMENTS`), so the steps and
//! partial blocks of an item follow the window schedule's formulas with
//! `seqlen_q = seqlen_k = len`, causal window `(inf, 0)` or full `(inf, inf)`. The items
//! are ordered by steps, most first (the largest-first order FlashAttention's varlen
//! schedulers and this project's backward use), so the longest rows start first and the
//! short ones fill the tail.

use fragmask_kernels::attention::Geometry;
use fragmask_masks::{DocumentKind, Documents};

/// Ints per work item of the kernel's table: document start, length, row block, document.
pub const ITEM_INTS: usize = 4;

/// One (document, row block) of the documents grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkItem {
    /// The document's index.
    pub document: u32,
    /// Its first token.
    pub start: u32,
    /// Its tokens.
    pub len: u32,
    /// The row block within the document (rows `start + m_block * block_m ..`).
    pub m_block: u32,
    /// Key blocks the row block visits (its walk's blocks).
    pub key_blocks: u32,
    /// Of those, the partial ones (the mask applied: the diagonal and the document's
    /// last, ragged key block).
    pub partial_blocks: u32,
}

impl WorkItem {
    /// Steps of `geometry` (key blocks per step) the item runs.
    pub fn steps(&self, geometry: &Geometry) -> u32 {
        self.key_blocks.div_ceil(geometry.step_blocks())
    }
}

/// The key blocks and partial key blocks row block `m_block` of a document of `len`
/// tokens visits under `kind` (the window walk with `diag_offset` 0 and window
/// `(inf, 0)` for causal, `(inf, inf)` for full).
pub fn row_block_blocks(
    kind: DocumentKind,
    len: u32,
    m_block: u32,
    block_m: u32,
    block_n: u32,
) -> (u32, u32) {
    let (len, m0) = (u64::from(len), u64::from(m_block) * u64::from(block_m));
    let (bm, bn) = (u64::from(block_m), u64::from(block_n));
    let n_blocks = len.div_ceil(bn);
    let m_end = (m0 + bm).min(len) - 1;
    let blocks = match kind {
        DocumentKind::Full => n_blocks,
        DocumentKind::Causal => (m_end / bn + 1).min(n_blocks),
    };
    // Full blocks: n*bn + bn <= len and (causal) n*bn + bn - 1 <= m0, n < blocks.
    let full_by_len = len / bn;
    let full = match kind {
        DocumentKind::Full => full_by_len,
        DocumentKind::Causal => full_by_len.min((m0 + 1) / bn),
    }
    .min(blocks);
    (blocks as u32, (blocks - full) as u32)
}

/// Every (document, row block) of `documents` at `geometry`'s tile, most steps first
/// (ties in document then row-block order).
pub fn work_items(documents: &Documents, geometry: &Geometry) -> Vec<WorkItem> {
    let (bm, bn) = (geometry.block_m(), geometry.block_n());
    let mut items = Vec::new();
    for d in 0..documents.count() {
        let range = documents.range(d);
        // Documents lie inside a sequence the packer accepted (<= i32::MAX tokens).
        let (start, len) = (range.start as u32, range.len() as u32);
        for m_block in 0..len.div_ceil(bm) {
            let (key_blocks, partial_blocks) =
                row_block_blocks(documents.kind(), len, m_block, bm, bn);
            items.push(WorkItem {
                document: d as u32,
                start,
                len,
                m_block,
                key_blocks,
                partial_blocks,
            });
        }
    }
    items.sort_by_key(|item| std::cmp::Reverse(item.steps(geometry)));
    items
}

/// The kernel's table of `items`: [`ITEM_INTS`] ints each (start, length, row block,
/// document), in launch order.
pub fn item_table(items: &[WorkItem]) -> Vec<i32> {
    items
        .iter()
        .flat_map(|i| {
            [i.start, i.len, i.m_block, i.document].map(|x| i32::try_from(x).unwrap_or(i32::MAX))
        })
        .collect()
}

/// (visited, partial) key blocks of one (batch, head) plane on the documents grid.
pub fn tiles(items: &[WorkItem]) -> (u64, u64) {
    items.iter().fold((0, 0), |(v, p), i| {
        (v + u64::from(i.key_blocks), p + u64::from(i.partial_blocks))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_causal_document_of_300_tokens_on_128x128() {
        let docs = Documents::new(DocumentKind::Causal, vec![0, 300]).unwrap();
        let items = work_items(&docs, &Geometry::TILE_128X128);
        // Row blocks 0..3 visit 1, 2, 3 key blocks; the diagonal is partial, and so is
        // block 2 (keys 256..300, ragged).
        let got: Vec<(u32, u32, u32)> = items
            .iter()
            .map(|i| (i.m_block, i.key_blocks, i.partial_blocks))
            .collect();
        assert_eq!(got, vec![(2, 3, 1), (1, 2, 1), (0, 1, 1)]);
        assert_eq!(item_table(&items)[..4], [0, 300, 2, 0]);
        let full = Documents::new(DocumentKind::Full, vec![0, 300]).unwrap();
        let items = work_items(&full, &Geometry::TILE_128X128);
        assert!(items
            .iter()
            .all(|i| (i.key_blocks, i.partial_blocks) == (3, 1)));
    }
}
