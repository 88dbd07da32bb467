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

/// One (document, key tile of the document) of the backward's documents grid: the key
/// tile's keys are `start + n_block * cta_n ..` (clipped to the document), and it walks the
/// sequence's 64-query steps from the first its keys are seen by to the document's last
/// (`family::schedule::key_tile::KeyGrid::Documents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyTileItem {
    /// The document's index.
    pub document: u32,
    /// Its first token.
    pub start: u32,
    /// Its tokens.
    pub len: u32,
    /// The key tile within the document.
    pub n_block: u32,
    /// Query steps of `step_m` rows the tile walks (per query head).
    pub steps: u32,
}

/// The query steps of `step_m` rows key tile `n_block` (of `cta_n` keys) of a document
/// at `start` of `len` tokens walks under `kind`: causal, from the step of the tile's
/// first key to the document's last token; full, every step of the document.
pub fn key_tile_steps(
    kind: DocumentKind,
    start: u32,
    len: u32,
    n_block: u32,
    cta_n: u32,
    step_m: u32,
) -> u32 {
    let (s, l, m) = (u64::from(start), u64::from(len), u64::from(step_m));
    let first = match kind {
        DocumentKind::Causal => s + u64::from(n_block) * u64::from(cta_n),
        DocumentKind::Full => s,
    };
    let last = s + l - 1;
    (last / m - first / m + 1) as u32
}

/// Every (document, key tile) of `documents` with key tiles of `cta_n` keys and query
/// steps of `step_m` rows, most steps first (ties in document then key-tile order).
pub fn key_tile_items(documents: &Documents, cta_n: u32, step_m: u32) -> Vec<KeyTileItem> {
    let mut items = Vec::new();
    for d in 0..documents.count() {
        let range = documents.range(d);
        // Documents lie inside a sequence the packer accepted (<= i32::MAX tokens).
        let (start, len) = (range.start as u32, range.len() as u32);
        for n_block in 0..len.div_ceil(cta_n) {
            items.push(KeyTileItem {
                document: d as u32,
                start,
                len,
                n_block,
                steps: key_tile_steps(documents.kind(), start, len, n_block, cta_n, step_m),
            });
        }
    }
    items.sort_by_key(|item| std::cmp::Reverse(item.steps));
    items
}

/// The backward kernel's table of `items`: [`ITEM_INTS`] ints each (start, length, key
/// tile, document), in launch order.
pub fn key_tile_table(items: &[KeyTileItem]) -> Vec<i32> {
    items
        .iter()
        .flat_map(|i| {
            [i.start, i.len, i.n_block, i.document].map(|x| i32::try_from(x).unwrap_or(i32::MAX))
        })
        .collect()
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

    #[test]
    fn key_tiles_of_a_causal_document_at_token_100_walk_its_steps_from_their_first_key() {
        let docs = Documents::new(DocumentKind::Causal, vec![0, 100, 400]).unwrap();
        let items = key_tile_items(&docs, 128, 64);
        let got: Vec<(u32, u32, u32)> = items
            .iter()
            .map(|i| (i.document, i.n_block, i.steps))
            .collect();
        // Document 1 (tokens 100..400): tile 0 (keys 100..) walks steps 1..=6, tile 1
        // (keys 228..) steps 3..=6, tile 2 (keys 356..) step 5..=6; document 0 (0..100):
        // steps 0..=1.
        assert_eq!(got, vec![(1, 0, 6), (1, 1, 4), (0, 0, 2), (1, 2, 2)]);
        assert_eq!(key_tile_table(&items)[..4], [100, 300, 0, 1]);
        let full = Documents::new(DocumentKind::Full, vec![0, 100, 400]).unwrap();
        assert!(key_tile_items(&full, 128, 64)
            .iter()
            .all(|i| i.steps == if i.document == 0 { 2 } else { 6 }));
    }
}
